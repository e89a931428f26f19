#!/usr/bin/env bash
# Side-by-side benchmark of nodecache, CoreDNS (cache+forward, kubernetes)
# and Unbound on one machine; prints one table and writes bench/RESULTS.md.
# See bench/README.md and the README's Performance section. `make bench` runs it after `make build`.
#
# Environment:
#   BENCH_PHASE_SECONDS  length of each load phase (default 10)
#   BENCH_REPEAT         runs of each max-QPS hit, miss and zone phase; the median counts (default 3)
#   BENCH_LAT_REPEAT     rounds of the cache-hit latency runs at HIT_RATE (default 9): one run's p99
#                        moves more between runs than nodecache's and Unbound's differ
#   BENCH_GO=0           skip the `go test -bench` rows
#   BENCH_PROFILE=0      skip the CPU profiles of nodecache's hit and miss paths
#   BENCH_PROFILE_DIR    where they go (default ~/.cache/nodecache-bench/profiles; not the repo)
#   BENCH_FORWARD=0      skip the forwarding rows (cache hit, miss, RSS)
#   BENCH_ZONE=0         skip the cluster-zone rows (no API server needed then)
#   BENCH_BIGZONE=0      skip the memory rows on the 10,000-service cluster (and
#                        loading its 9,000 more services into the API server)
#   BENCH_KEEP=1         keep the work directory (logs, configs, profiles)
#   BENCH_RESULTS        where the table goes (default bench/RESULTS.md; the sections below its marker line
#                        are kept): a run of some rows only, e.g. BENCH_FORWARD=0 BENCH_BIGZONE=0 BENCH_GO=0
#                        BENCH_PROFILE=0 for the zone rows, writes elsewhere
#   BENCH_LOADBALANCE=1  run every nodecache with --loadbalance (A/AAAA shuffled in each answer), for
#                        the on/off comparison: run once with and once without, same machine and sitting
#   BENCH_NODECACHE_FLAGS  more flags for every nodecache of the run (e.g. "--supervise=false")
#   BENCH_BEFORE_BIN     an older nodecache binary (the tree before a change): its forwarding rows are
#                        measured right after this tree's, and a table of the two goes beside the main one
#   BENCH_VARIANT_FLAGS  run the forwarding rows (cache hit, miss, RSS) a second time, right after the
#                        default nodecache's, with a nodecache given these flags as well, and add a table
#                        of the two side by side: e.g. BENCH_VARIANT_FLAGS=--supervise=false measures what
#                        the supervisor and its cache journal cost, in one sitting
#   NODECACHE_BENCH_CACHE  where CoreDNS is built (default ~/.cache/nodecache-bench)
#   COREDNS_VERSION      default v1.15.0
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PHASE=${BENCH_PHASE_SECONDS:-10}
REPEAT=${BENCH_REPEAT:-3}
[[ "$REPEAT" =~ ^[1-9]$ ]] || { echo "BENCH_REPEAT=$REPEAT: want 1 to 9" >&2; exit 1; }
LAT_REPEAT=${BENCH_LAT_REPEAT:-9}
[[ "$LAT_REPEAT" =~ ^[1-9][0-9]?$ ]] || { echo "BENCH_LAT_REPEAT=$LAT_REPEAT: want 1 to 99" >&2; exit 1; }
CACHE_DIR=${NODECACHE_BENCH_CACHE:-$HOME/.cache/nodecache-bench}
PROFILE_DIR=${BENCH_PROFILE_DIR:-$CACHE_DIR/profiles}
COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
RESULTS=${BENCH_RESULTS:-$ROOT/bench/RESULTS.md}
NODECACHE=${NODECACHE_BIN:-$ROOT/bin/nodecache}
# Without NODECACHE_BIN the tree's own binary is measured: built here, so that
# a bin/nodecache left from an older commit is never the one in the table.
if [ -z "${NODECACHE_BIN:-}" ]; then
  make -C "$ROOT" --no-print-directory build >&2 || { echo "building bin/nodecache failed" >&2; exit 1; }
fi
ZONE=bench.example.
WARM=100000           # names warmed before the RSS reading: n0..n99999
HIT=10000             # cache-hit working set: n0..n9999 (inside WARM)
MISS_FROM=100000      # miss throughput: n100000.. (never asked before)
MISS_RUN=100000       # names of each miss run (one set a run: $REPEAT sets)
MISSLAT_FROM=$((MISS_FROM + REPEAT * MISS_RUN)) # miss latency: never asked before
NAMES=$((MISSLAT_FROM + 50000)) # names in the upstream zone
HIT_RATE=10000        # fixed rate of the latency rows
MISS_RATE=2000
CACHE_SIZE=256MiB
CACHE_SIZE_UNBOUND=256m

WORK=$(mktemp -d /tmp/nodecache-bench.XXXXXX)
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
# shellcheck source=bench/forward.sh
source "$ROOT/bench/forward.sh"
# shellcheck source=bench/zone.sh
source "$ROOT/bench/zone.sh"
cleanup() {
  stop_all
  if [ "${BENCH_KEEP:-0}" = 1 ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ "$(nproc)" -ge 2 ] || die "needs 2 CPUs: servers run on CPU 0, load generators on CPU 1"
for t in dnsperf nsd unbound taskset dig ss cc; do command -v "$t" >/dev/null || die "$t not installed"; done
[ -x "$NODECACHE" ] || die "$NODECACHE missing: run make build"
[ "$PHASE" -ge 2 ] && [ "$PHASE" -le 60 ] || die "BENCH_PHASE_SECONDS=$PHASE: want 2 to 60"
[ -z "${BENCH_BEFORE_BIN:-}" ] || [ -x "$BENCH_BEFORE_BIN" ] || die "BENCH_BEFORE_BIN=$BENCH_BEFORE_BIN is not an executable"

# --- tools ----------------------------------------------------------------
BENCHTOOL=$WORK/benchtool
(cd "$ROOT" && go build -o "$BENCHTOOL" ./bench/benchtool) || die "building benchtool"
FLOOR=$WORK/floor
cc -O2 -o "$FLOOR" "$ROOT/bench/floor/floor.c" || die "building bench/floor"
COREDNS=$(NODECACHE_BENCH_CACHE=$CACHE_DIR COREDNS_VERSION=$COREDNS_VERSION "$ROOT/bench/build-coredns.sh") ||
  die "building CoreDNS"

# --- data -----------------------------------------------------------------
log "generating the upstream zone ($NAMES names) and query files"
mkdir -p "$WORK/nsd"
write_zone "$WORK/nsd/zone" "$NAMES"
names() { awk -v a="$1" -v b="$2" -v z="$ZONE" 'BEGIN { for (i = a; i < b; i++) printf "n%d.%s A\n", i, z }'; }
names 0 "$WARM" >"$WORK/warm.txt"
names 0 "$HIT" >"$WORK/hit.txt"
for ((i = 0; i < REPEAT; i++)); do
  names $((MISS_FROM + i * MISS_RUN)) $((MISS_FROM + (i + 1) * MISS_RUN)) >"$WORK/miss.$i.txt"
done
names "$MISSLAT_FROM" "$NAMES" >"$WORK/misslat.txt"
names 0 "$WARM" | sed 's/ A$/ AAAA/' >"$WORK/missprof.txt"

NSD_PORT=$(free_port)
write_nsd_conf "$WORK/nsd" "$NSD_PORT" "$WORK/nsd/zone"
start nsd 1 nsd -d -c "$WORK/nsd/nsd.conf"
wait_dns "$NSD_PORT" "n$((NAMES - 1)).$ZONE" A NOERROR 60

declare -A R # R[row|server] = value

if [ "${BENCH_FORWARD:-1}" = 1 ]; then
  measure_forwarders
fi

# --- cluster zone ------------------------------------------------------------
if [ "${BENCH_ZONE:-1}" = 1 ]; then
  measure_zone
fi
stop_all

# --- Go benchmarks -------------------------------------------------------------
if [ "${BENCH_GO:-1}" = 1 ]; then
  log "== go test -bench (wire, server, cache, kubezone)"
  (cd "$ROOT" && go test -run '^$' -bench . -benchmem ./pkg/wire ./pkg/server ./pkg/cache ./pkg/kubezone) \
    >"$WORK/gobench.txt" 2>&1 || log "go test -bench failed; its output goes to RESULTS.md as is"
fi

# shellcheck source=bench/report.sh
source "$ROOT/bench/report.sh"
# The table above the marker line is this run's; the sections below it
# (churn, restart storms, before/after comparisons) are kept as they are.
marker='<!-- Sections below are kept by bench/run.sh: each names its own commit and command. -->'
kept=$(awk -v m="$marker" '$0 == m { on = 1 } on' "$RESULTS" 2>/dev/null || true)
{
  report
  printf '\n%s\n' "${kept:-$marker}"
} >"$WORK/RESULTS.md"
cat "$WORK/RESULTS.md"
cp "$WORK/RESULTS.md" "$RESULTS"
log "done in $((SECONDS / 60)) min $((SECONDS % 60)) s"
