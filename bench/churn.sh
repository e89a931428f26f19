#!/usr/bin/env bash
# EndpointSlice churn: N nodecache agents and N CoreDNS processes (kubernetes
# plugin) watching one etcd + kube-apiserver on loopback, a fixed rate of
# slice updates, and per process kind: CPU per update, RSS, and the time from
# an update to the changed answer; then a kube-apiserver restart and the time
# until every watcher answers an update written after it. `make bench-churn`
# runs it; the driver is bench/churn (its doc comment says what each phase
# measures).
#
#   CHURN_SERVICES   default "1000 10000" (one run per size)
#   CHURN_WATCHERS   default 10 (agents, and as many CoreDNS)
#   CHURN_RATE       default 20 (updates per second)
#   CHURN_DURATION   default 20s (each phase)
#   CHURN_COREDNS    default 1 (0: agents only)
#   CHURN_HOLLOW     e.g. "50 100 200": hollow mode instead (bench/churn -hollow):
#                    that many agents' informers (pkg/kubezone's Run, each on
#                    its own connection) and as many kube-proxy-shaped
#                    watchers in one process; the API server's CPU per update,
#                    RSS and watches at each count, then a restart storm
#   NODECACHE_E2E_BIN  directory with etcd and kube-apiserver
#                    (default ~/.cache/nodecache-e2e/bin/k8s-v1.35.4-etcd-v3.7.3,
#                    from e2e/tools/build-k8s.sh)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE_DIR=${BENCH_CACHE:-$HOME/.cache/nodecache-bench}
COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
BIN_DIR=${NODECACHE_E2E_BIN:-$HOME/.cache/nodecache-e2e/bin/k8s-v1.35.4-etcd-v3.7.3}
SERVICES=${CHURN_SERVICES:-1000 10000}
WATCHERS=${CHURN_WATCHERS:-10}
RATE=${CHURN_RATE:-20}
DURATION=${CHURN_DURATION:-20s}
WORK=$(mktemp -d /tmp/nodecache-churn.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

die() { echo "churn.sh: $*" >&2; exit 1; }
for b in etcd kube-apiserver; do
  [ -x "$BIN_DIR/$b" ] || die "$BIN_DIR/$b missing: run e2e/tools/build-k8s.sh or set NODECACHE_E2E_BIN"
done
if [ -n "${CHURN_HOLLOW:-}" ]; then
  (cd "$ROOT" && go build -o "$WORK/churn" ./bench/churn) || die "building the driver"
  echo "## Hollow agents ($(date -u +%Y-%m-%d), $(cd "$ROOT" && git describe --always --dirty))"
  echo
  echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; $RATE updates/s for $DURATION."
  for n in $SERVICES; do
    echo
    "$WORK/churn" -bin-dir "$BIN_DIR" -dir "$WORK/$n" -restart -hollow "$CHURN_HOLLOW" \
      -services "$n" -rate "$RATE" -duration "$DURATION"
  done
  exit 0
fi
(cd "$ROOT" && make -s build && go build -o "$WORK/churn" ./bench/churn) || die "building nodecache and the driver"
COREDNS_ARGS=()
if [ "${CHURN_COREDNS:-1}" = 1 ]; then
  COREDNS=$CACHE_DIR/bin/coredns-$COREDNS_VERSION
  if [ ! -x "$COREDNS" ]; then
    echo "building CoreDNS $COREDNS_VERSION into $CACHE_DIR (once, a few minutes)" >&2
    mkdir -p "$CACHE_DIR/bin"
    (cd "$CACHE_DIR" && GOBIN=$CACHE_DIR/bin GOFLAGS=-mod=mod CGO_ENABLED=0 \
      go install "github.com/coredns/coredns@$COREDNS_VERSION" && mv "$CACHE_DIR/bin/coredns" "$COREDNS") ||
      die "building CoreDNS"
  fi
  COREDNS_ARGS=(-coredns "$COREDNS")
fi

echo "## EndpointSlice churn ($(date -u +%Y-%m-%d), $(cd "$ROOT" && git describe --always --dirty))"
echo
echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; CoreDNS $COREDNS_VERSION;" \
  "$WATCHERS watchers of each kind; $RATE updates/s for $DURATION."
for n in $SERVICES; do
  echo
  echo "### $n services x 10 endpoints"
  echo
  "$WORK/churn" -bin-dir "$BIN_DIR" -nodecache "$ROOT/bin/nodecache" "${COREDNS_ARGS[@]}" -dir "$WORK/$n" -restart \
    -services "$n" -watchers "$WATCHERS" -rate "$RATE" -duration "$DURATION"
done
