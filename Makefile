# nodecache. `make run` starts the agent on 127.0.0.1:5353 without privileges;
# `make test` sets up what it needs (hack/install-deps.sh: Debian packages,
# kernel modules), then runs the unit tests and the e2e suite (root, network
# namespaces, a real kube-apiserver built from the Go module proxy), which
# fails rather than skips when something is missing.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
BIN     := bin/nodecache
# make image writes the OCI image layout here; make image-push REGISTRY=...
# publishes it as $(REGISTRY)/nodecache:$(VERSION).
IMAGE_OUT ?= _output/image
REGISTRY  ?=
IMAGE_NAME = $(if $(REGISTRY),$(REGISTRY)/nodecache,nodecache)
UPSTREAM ?= /etc/resolv.conf

.PHONY: all build run deps test unit e2e conformance image image-push image-pins release bench bench-churn bench-go fuzz lint docs clean

all: build

# bin/nodecache and, beside it, the supervisor's own binary that `nodecache
# run` execs (internal/supervise; without it the supervisor runs in-process).
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/nodecache
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(dir $(BIN))nodecache-supervisor ./cmd/nodecache-supervisor

# A newcomer's first command: a caching forwarder on loopback that also serves
# a demo cluster zone from deploy/examples/fixture.yaml.
#   dig @127.0.0.1 -p 5353 web.demo.svc.cluster.local
run: build
	$(BIN) run --local-ip 127.0.0.1 --port 5353 \
		--setup-interface=false --setup-iptables=false \
		--upstream $(UPSTREAM) --fixture deploy/examples/fixture.yaml \
		--health-addr 127.0.0.1:8080 --metrics-addr 127.0.0.1:9253 \
		--admin-socket /tmp/nodecache/admin.sock --handover-socket /tmp/nodecache/handover.sock

# The README's test command; .ci/run calls it. As root on a fresh Debian
# machine with Go it installs what the tests drive and runs everything:
# CI=true (unless set) makes a missing prerequisite a failure, in the unit
# tests (CoreDNS for the migrate comparison, root) as in the e2e suite.
test: deps
	@coredns=$${NODECACHE_COREDNS:-$$(bench/build-coredns.sh)} && \
		CI=$${CI:-true} NODECACHE_COREDNS=$$coredns $(MAKE) unit e2e

# The Debian packages and kernel modules of the e2e suite (idempotent).
deps:
	hack/install-deps.sh

# The tools/ modules (own go.mod, so not in ./...): the Helm chart's tests
# and the image builder's (two builds compared byte for byte).
TOOL_MODULES := tools/helmchart tools/image

unit:
	$(GO) vet ./...
	$(GO) test -count=1 ./...
	@set -e; for m in $(TOOL_MODULES); do \
		echo "== $$m"; (cd $$m && $(GO) vet ./... && $(GO) test -count=1 ./...); \
	done

# Needs root. Builds etcd and the Kubernetes binaries once into
# ~/.cache/nodecache-e2e and CoreDNS into ~/.cache/nodecache-bench; the real
# node runs the image make image built. CI=true unless set: a missing
# prerequisite fails the suite instead of skipping it.
e2e: image
	CI=$${CI:-true} NODECACHE_IMAGE=$(abspath $(IMAGE_OUT)) \
	NODECACHE_E2E_BIN=$${NODECACHE_E2E_BIN:-$$(e2e/tools/build-k8s.sh)} \
	NODECACHE_COREDNS=$${NODECACHE_COREDNS:-$$(bench/build-coredns.sh)} \
		$(GO) test -tags e2e -count=1 -timeout 45m -v ./e2e/...

# Kubernetes' own [sig-network] DNS tests (e2e.test v1.35.4) against the
# DaemonSet on the real node; JUnit into $$CONFORMANCE_REPORT_DIR (default
# _output/conformance). NODECACHE_CONFORMANCE_DNS=coredns runs the same
# against CoreDNS. See docs/conformance.md. Needs root.
conformance: image
	CI=$${CI:-true} NODECACHE_IMAGE=$(abspath $(IMAGE_OUT)) \
	NODECACHE_E2E_BIN=$${NODECACHE_E2E_BIN:-$$(e2e/tools/build-k8s.sh)} \
	NODECACHE_COREDNS=$${NODECACHE_COREDNS:-$$(bench/build-coredns.sh)} \
		$(GO) test -tags e2e -count=1 -timeout 30m -v -run '^TestConformance$$' ./e2e/

# The agent image for linux/amd64 and linux/arm64 as an OCI image layout,
# built without a container daemon by tools/image (docs/image.md): the static
# agent on the Debian packages tools/image/debian-pins.txt pins, downloaded
# once into ~/.cache/nodecache-image. The same commit and pins give the same
# digests; the real-node e2e test runs this image.
image:
	cd tools/image && $(GO) run . build -src $(CURDIR) -out $(abspath $(IMAGE_OUT)) \
		-version $(VERSION) -commit $(COMMIT) -repository $(IMAGE_NAME)
	cd tools/image && $(GO) run . digest -layout $(abspath $(IMAGE_OUT))

# Not run by the tests: needs a registry and credentials (docker login or a
# credential helper in ~/.docker/config.json).
image-push: image
	@test -n "$(REGISTRY)" || { echo "usage: make image-push REGISTRY=registry.example.com/team (pushes REGISTRY/nodecache:$(VERSION))" >&2; exit 2; }
	cd tools/image && $(GO) run . push -layout $(abspath $(IMAGE_OUT)) -ref $(IMAGE_NAME):$(VERSION)

# Re-resolve the Debian pins (gpgv-checked), then review and commit the diff.
image-pins:
	tools/image/update-pins.sh

# A release from a clean checkout (tag it first: VERSION is git describe):
# the image layout, the agent and its supervisor for both arches (the very
# binaries in the image) and SHA256SUMS over all of it, in _output/release.
RELEASE_OUT := _output/release
release:
	@case "$(VERSION)" in *-dirty) echo "release: the work tree has changes; commit them first ($(VERSION))" >&2; exit 1;; esac
	rm -rf $(RELEASE_OUT) && mkdir -p $(RELEASE_OUT)
	cd tools/image && $(GO) run . build -src $(CURDIR) -out $(abspath $(RELEASE_OUT))/image \
		-binaries $(abspath $(RELEASE_OUT)) -version $(VERSION) -commit $(COMMIT) -repository $(IMAGE_NAME)
	cd $(RELEASE_OUT) && find nodecache-* image -type f | LC_ALL=C sort | xargs sha256sum > SHA256SUMS
	cd tools/image && $(GO) run . digest -layout $(abspath $(RELEASE_OUT))/image | tee $(abspath $(RELEASE_OUT))/DIGESTS

bench-go:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/...

# Side-by-side dnsperf run against CoreDNS and Unbound; see bench/README.md.
bench: build
	bench/run.sh

# N agents and N CoreDNS under EndpointSlice churn against one real API server;
# see bench/churn.sh (about 8 minutes at the defaults).
bench-churn:
	bench/churn.sh

# Every fuzz target in the repository, FUZZTIME each: found by name, so a
# new target runs without an edit here. `make fuzz FUZZTIME=10m` for a soak.
FUZZTIME ?= 10s
fuzz:
	@set -e; for f in $$(git grep -l '^func Fuzz' -- '*_test.go'); do \
		for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "== $$t ./$$(dirname $$f) ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) ./$$(dirname $$f); \
		done; \
	done

# The linters; .golangci.yml states each rule and why its exceptions are safe.
GOLANGCI_LINT_VERSION ?= v2.15.0
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...
	$(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run ./...
	$(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run --build-tags e2e ./e2e/...
	@set -e; for m in $(TOOL_MODULES); do \
		(cd $$m && $(GO) vet ./... && $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run --config $(CURDIR)/.golangci.yml ./...); \
	done

# docs/flags.md and docs/metrics.md from the flag sets and an in-process
# agent's registry; `go test ./...` fails when the committed pages drift.
docs:
	$(GO) test -count=1 ./cmd/nodecache ./internal/agent -run '^Test(Flags|Metrics)Doc$$' -update-docs

clean:
	rm -rf bin _output
