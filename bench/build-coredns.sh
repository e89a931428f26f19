#!/usr/bin/env bash
# Builds CoreDNS from the Go module proxy, once, into a cache outside the
# repository, and prints the binary's path. bench/run.sh compares against it;
# the migrate test (TestMigrateMatchesCoreDNS) answers the same questions
# through it and through nodecache.
#
# Environment: NODECACHE_BENCH_CACHE (default ~/.cache/nodecache-bench),
# COREDNS_VERSION (default v1.15.0).
set -euo pipefail
COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
CACHE_DIR=${NODECACHE_BENCH_CACHE:-$HOME/.cache/nodecache-bench}
COREDNS=$CACHE_DIR/bin/coredns-$COREDNS_VERSION
if [ ! -x "$COREDNS" ]; then
  echo "build-coredns: building CoreDNS $COREDNS_VERSION into $CACHE_DIR (once, a few minutes)" >&2
  mkdir -p "$CACHE_DIR/bin"
  (cd "$CACHE_DIR" && GOBIN=$CACHE_DIR/bin GOFLAGS=-mod=mod CGO_ENABLED=0 \
    go install "github.com/coredns/coredns@$COREDNS_VERSION" && mv "$CACHE_DIR/bin/coredns" "$COREDNS")
fi
echo "$COREDNS"
