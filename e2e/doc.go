// Package e2e is the end-to-end rig for nodecache. Everything in it is built
// only with the e2e build tag:
//
//	go test -tags e2e -count=1 -v ./e2e/...
//
// The rig starts one etcd and one kube-apiserver per test binary on 127.0.0.1
// of the host network namespace (binaries from e2e/tools/build-k8s.sh,
// found through NODECACHE_E2E_BIN or the script's cache), with self-generated
// certificates, a static admin token, RBAC and dual-stack service CIDRs. The
// agent under test runs as the real nodecache binary inside a "node" network
// namespace with the identity of the ServiceAccount bound to the ClusterRole
// in deploy/base/rbac.yaml, and is queried by dig, kdig and the glibc
// resolver from "pod" network namespaces joined to the node by veth pairs.
//
// Config (environment):
//
//	CI=true              refuse to skip: a missing prerequisite (root, the
//	                     apiserver binaries) fails the suite instead
//	NODECACHE_E2E_BIN    directory holding kube-apiserver and etcd; empty
//	                     means ask e2e/tools/build-k8s.sh (cached)
//	NODECACHE_E2E_AGENT  a prebuilt nodecache binary (its supervisor's
//	                     binary beside it); empty means go build
//	                     ./cmd/nodecache and ./cmd/nodecache-supervisor
//	                     once per test binary
//
// See e2e/README.md for the network layout and the setns tricks.
package e2e
