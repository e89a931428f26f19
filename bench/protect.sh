#!/usr/bin/env bash
# protect.sh "NAME|BIN"...: what the crash protection costs in memory. For
# each binary, in rounds, one variant after the other (never two up at
# once, so no file pages are shared): a supervised nodecache and the same
# with --supervise=false, each warmed with the same 100,000 names from NSD
# (--cache-size 256MiB), then, 2 s after the warm, the tree's RSS and PSS
# with its memfds (bench/lib.sh's rss_kib and pss_kib). The protection's
# cost is the supervised minus the unsupervised figure of the same round.
#
#   PROTECT_ROUNDS=2 bench/protect.sh "before|/tmp/old/nodecache" "after|bin/nodecache"
#
# Needs dnsperf, nsd, taskset, dig; traffic stays on 127.0.0.1.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${PROTECT_ROUNDS:-2}
ZONE=bench.example.
WARM=100000
CACHE_SIZE=256MiB
WORK=$(mktemp -d /tmp/nodecache-protect.XXXXXX)
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
# shellcheck source=bench/forward.sh
source "$ROOT/bench/forward.sh"
trap 'stop_all; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

[ "$#" -ge 1 ] || die "usage: bench/protect.sh \"NAME|BIN\"..."
[[ "$ROUNDS" =~ ^[1-9]$ ]] || die "PROTECT_ROUNDS=$ROUNDS: want 1 to 9"

mkdir -p "$WORK/nsd"
write_zone "$WORK/nsd/zone" "$WARM"
awk -v n="$WARM" -v z="$ZONE" 'BEGIN { for (i = 0; i < n; i++) printf "n%d.%s A\n", i, z }' >"$WORK/warm.txt"
NSD_PORT=$(free_port)
write_nsd_conf "$WORK/nsd" "$NSD_PORT" "$WORK/nsd/zone"
start nsd 1 nsd -d -c "$WORK/nsd/nsd.conf"
wait_dns "$NSD_PORT" "n$((WARM - 1)).$ZONE" A NOERROR 60

for r in $(seq "$ROUNDS"); do
  for v in "$@"; do
    IFS='|' read -r name bin <<<"$v"
    [ -x "$bin" ] || die "$bin: not an executable"
    for sup in true false; do
      port=$(free_port)
      # shellcheck disable=SC2046
      start "$name.$sup.$r" 0 "$bin" $(nodecache_args "$port") --upstream "127.0.0.1:$NSD_PORT" --supervise="$sup"
      pid=$PID
      wait_dns "$port" "n1.$ZONE" A NOERROR
      dnsperf_run "$pid" "$port" "$WORK/warm.txt" -n 1 -l 120 -q 50
      sleep 2
      rss=$(rss_kib "$pid"); pss=$(pss_kib "$pid")
      stop "$pid"
      eval "rss_$sup=$rss pss_$sup=$pss"
    done
    # shellcheck disable=SC2154
    printf 'round %d %-10s supervised RSS %.1f PSS %.1f MiB, unsupervised RSS %.1f PSS %.1f MiB: protection RSS %+.1f PSS %+.1f MiB\n' \
      "$r" "$name" "$(bc -l <<<"$rss_true/1024")" "$(bc -l <<<"$pss_true/1024")" "$(bc -l <<<"$rss_false/1024")" \
      "$(bc -l <<<"$pss_false/1024")" "$(bc -l <<<"($rss_true-$rss_false)/1024")" "$(bc -l <<<"($pss_true-$pss_false)/1024")"
  done
done
