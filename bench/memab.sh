#!/usr/bin/env bash
# memab.sh "NAME|ENV|BIN|FLAGS"...: interleaved memory and miss runs of
# nodecache variants (binaries, flags, or environments such as GOGC=25),
# for the trade between the RSS per cached name and the miss path's CPU.
# Each round starts every variant in turn, pinned to CPU 0 as bench/run.sh
# does, warms it with the same 100,000 names, reads the RSS per name as
# run.sh's row does (rss_kib: the process tree and its memfds, warmed −
# idle, ÷ 100,000) and the warmed tree's RSS and PSS with them, then runs
# run.sh's miss phase and reports its CPU per answer and, from
# GODEBUG=gctrace=1, the GC cycles and the GC's own CPU per answer in that
# phase. One variant runs at a time, so none shares file pages with another.
#
#   MEMAB_ROUNDS=2 bench/memab.sh "gogc50||bin/nodecache|" "gogc25|GOGC=25|bin/nodecache|"
#   bench/memab.sh "sup||bin/nodecache|" "nosup||bin/nodecache|--supervise=false"
#
# The crash protection's memory is the warmed RSS (or PSS) of "sup" less
# that of "nosup" of the same round: the supervisor, the journal's ring, and
# what the journal adds to the serving process. A BIN runs its supervisor
# from the nodecache-supervisor beside it (make build writes
# bin/nodecache-supervisor), or in-process when there is none.
#
# MEMAB_ROUNDS (default 2), MEMAB_SECONDS (miss phase, default 5). Needs
# dnsperf, nsd, taskset, dig, ss; root for nice.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${MEMAB_ROUNDS:-2}
PHASE=${MEMAB_SECONDS:-5}
ZONE=bench.example.
NAMES=300000
WARM=100000
CACHE_SIZE=256MiB
WORK=$(mktemp -d /tmp/nodecache-memab.XXXXXX)
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
# shellcheck source=bench/forward.sh
source "$ROOT/bench/forward.sh"
trap 'stop_all; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

[ "$#" -ge 1 ] || die "usage: bench/memab.sh \"NAME|ENV|BIN|FLAGS\"..."
[[ "$ROUNDS" =~ ^[1-9]$ ]] || die "MEMAB_ROUNDS=$ROUNDS: want 1 to 9"

mkdir -p "$WORK/nsd"
write_zone "$WORK/nsd/zone" "$NAMES"
names() { awk -v a="$1" -v b="$2" -v z="$ZONE" 'BEGIN { for (i = a; i < b; i++) printf "n%d.%s A\n", i, z }'; }
names 0 "$WARM" >"$WORK/warm.txt"
names "$WARM" "$NAMES" >"$WORK/miss.txt"
NSD_PORT=$(free_port)
write_nsd_conf "$WORK/nsd" "$NSD_PORT" "$WORK/nsd/zone"
start nsd 1 nsd -d -c "$WORK/nsd/nsd.conf"
wait_dns "$NSD_PORT" "n$((NAMES - 1)).$ZONE" A NOERROR 60

for r in $(seq "$ROUNDS"); do
  for v in "$@"; do
    IFS='|' read -r name envs bin flags <<<"$v"
    [ -x "$bin" ] || die "$bin: not an executable"
    port=$(free_port)
    # shellcheck disable=SC2046,SC2086
    start "$name.$r" 0 env GODEBUG=gctrace=1 $envs "$bin" $(nodecache_args "$port") \
      --upstream "127.0.0.1:$NSD_PORT" --metrics-addr "127.0.0.1:$(free_port)" $flags
    pid=$PID
    wait_dns "$port" "n1.$ZONE" A NOERROR
    idle=$(rss_kib "$pid")
    dnsperf_run "$pid" "$port" "$WORK/warm.txt" -n 1 -l 120 -q 50
    warm=$(rss_kib "$pid"); pss=$(pss_kib "$pid")
    before=$(grep -c '^gc ' "$WORK/$name.$r.log" || true)
    dnsperf_run "$pid" "$port" "$WORK/miss.txt" -n 1 -l "$PHASE" -q 100
    stop "$pid"
    # gctrace: "... A+B/C/D+E ms cpu ...": every part is CPU time of the cycle.
    gc=$(tail -n +$((before + 1)) "$WORK/$name.$r.log" | grep '^gc ' |
      sed -n 's/.* \([0-9.+/]*\) ms cpu.*/\1/p' | tr '+/' '  ' |
      awk '{ for (i = 1; i <= NF; i++) ms += $i; n++ } END { printf "%d %.1f", n, ms }')
    printf 'round %d %-12s RSS %.3f KiB/name (warmed: RSS %.1f MiB, PSS %.1f MiB)  miss %s us/answer  GC %s cycles, %s us/answer\n' "$r" "$name" \
      "$(awk -v w="$warm" -v i="$idle" -v n="$WARM" 'BEGIN { print (w - i) / n }')" "$(awk -v k="$warm" 'BEGIN { print k / 1024 }')" \
      "$(awk -v k="$pss" 'BEGIN { print k / 1024 }')" "$CPU_US" "${gc% *}" \
      "$(awk -v ms="${gc#* }" -v n="$DONE" 'BEGIN { printf "%.2f", ms * 1000 / n }')"
  done
done
