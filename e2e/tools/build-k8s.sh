#!/usr/bin/env bash
# Builds the Kubernetes parts of the e2e rig from the Go module proxy, once,
# into a cache outside the repository, and prints the directory holding them:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
# kube-proxy; then Kubernetes' own e2e test binary `e2e.test` and its test
# image's binary `agnhost`, which `make conformance` runs.
#
#   e2e/tools/build-k8s.sh            # build what is missing, print the dir
#   e2e/tools/build-k8s.sh cluster    # only the cluster's binaries
#
# All the Kubernetes binaries come from one module at one version, so they
# share the compile. The version is v1.35: the newest kubelet that still runs
# on containerd 1.x, which is what Debian ships.
#
# Environment: NODECACHE_E2E_CACHE (default ~/.cache/nodecache-e2e),
# K8S_VERSION (default v1.35.4), ETCD_VERSION (default v3.7.3).
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.35.4}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
CACHE=${NODECACHE_E2E_CACHE:-$HOME/.cache/nodecache-e2e}
OUT="$CACHE/bin/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"
STAGING_VERSION="v0.${K8S_VERSION#v1.}"
K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
WHAT=${1:-all}

log() { echo "build-k8s: $*" >&2; }

mkdir -p "$OUT"
export GOFLAGS=-mod=mod
export CGO_ENABLED=0

if [ ! -x "$OUT/etcd" ]; then
  log "building etcd $ETCD_VERSION (about 2 minutes cold)"
  start=$(date +%s)
  # etcd's go.mod carries replace directives, so `go install mod@v` refuses
  # it; a throwaway consumer module builds it with the published modules.
  mod="$CACHE/etcd-build-$ETCD_VERSION"
  rm -rf "$mod"; mkdir -p "$mod"
  (cd "$mod" && go mod init nodecache-e2e/etcd >/dev/null 2>&1 &&
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2 &&
    go build -trimpath -ldflags "-s -w" -o "$OUT/etcd" go.etcd.io/etcd/server/v3) || true
  [ -x "$OUT/etcd" ] || { log "etcd build failed"; exit 1; }
  log "etcd built in $(( $(date +%s) - start ))s"
fi

ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${STAGING_VERSION#v0.}"
mod="$CACHE/k8s-build-$K8S_VERSION"

# k8s_module makes (or reuses) the consumer module that builds k8s.io/kubernetes
# packages at K8S_VERSION, and cds into it.
k8s_module() {
  if ! grep -q "k8s.io/kubernetes $K8S_VERSION" "$mod/go.mod" 2>/dev/null; then
    rm -rf "$mod"; mkdir -p "$mod"
    (cd "$mod" && go mod init nodecache-e2e/k8s >/dev/null 2>&1)
    # kubernetes' own go.mod lists its staging modules as k8s.io/* v0.0.0
    # requirements, satisfied by replace lines into ./staging. A consumer must
    # replace each with the published v0.x module.
    local gomod mods n=0
    gomod=$(cd "$mod" && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    [ -f "$gomod" ] || { log "cannot download k8s.io/kubernetes@$K8S_VERSION go.mod"; exit 1; }
    mods=$(awk '/^replace \(/{inrep=1;next} inrep&&/^\)/{inrep=0} inrep&&$1 ~ /^k8s\.io\//&&$3 ~ /staging/{print $1}' "$gomod")
    [ -n "$mods" ] || mods=$(grep -oE 'k8s\.io/[a-z0-9-]+ v0\.0\.0' "$gomod" | awk '{print $1}' | sort -u)
    for m in $mods; do
      (cd "$mod" && go mod edit -replace "$m=$m@$STAGING_VERSION"); n=$((n+1))
    done
    log "replaced $n staging modules at $STAGING_VERSION"
    (cd "$mod" && go mod edit -require "k8s.io/kubernetes@$K8S_VERSION")
  fi
  cd "$mod"
}

missing=()
for c in "${K8S_CMDS[@]}"; do [ -x "$OUT/$c" ] || missing+=("$c"); done
if [ ${#missing[@]} -gt 0 ]; then
  log "building ${missing[*]} $K8S_VERSION (about 25 minutes cold on 2 cores)"
  start=$(date +%s)
  k8s_module
  pkgs=()
  for c in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  for p in "${pkgs[@]}"; do go get "$p@$K8S_VERSION" >&2; done
  tmp="$mod/out"; mkdir -p "$tmp"
  go build -trimpath -o "$tmp/" -ldflags "$ldflags" "${pkgs[@]}"
  for c in "${missing[@]}"; do mv "$tmp/$c" "$OUT/$c"; done
  log "${missing[*]} built in $(( $(date +%s) - start ))s"
fi

# The conformance suite: e2e.test (a test binary, so `go test -c`) and agnhost,
# the binary of the suite's registry.k8s.io/e2e-test-images/agnhost image.
if [ "$WHAT" = all ] && { [ ! -x "$OUT/e2e.test" ] || [ ! -x "$OUT/agnhost" ]; }; then
  log "building e2e.test and agnhost $K8S_VERSION (about 15 minutes cold on 2 cores)"
  start=$(date +%s)
  k8s_module
  go get "k8s.io/kubernetes/test/e2e@$K8S_VERSION" "k8s.io/kubernetes/test/images/agnhost@$K8S_VERSION" >&2
  tmp="$mod/out"; mkdir -p "$tmp"
  if [ ! -x "$OUT/agnhost" ]; then
    go build -trimpath -ldflags "-s -w" -o "$tmp/agnhost" k8s.io/kubernetes/test/images/agnhost
    mv "$tmp/agnhost" "$OUT/agnhost"
  fi
  if [ ! -x "$OUT/e2e.test" ]; then
    go test -c -trimpath -ldflags "$ldflags" -o "$tmp/e2e.test" k8s.io/kubernetes/test/e2e
    mv "$tmp/e2e.test" "$OUT/e2e.test"
  fi
  log "e2e.test and agnhost built in $(( $(date +%s) - start ))s"
fi
echo "$OUT"
