#!/usr/bin/env bash
# The cache journal's trade-off: the hit ratio right after a SIGKILL of the
# serving process, for working sets that fit the journal's ring and ones
# that do not. For each N: a supervised nodecache (--cache-size 64MiB, and
# BENCH_NODECACHE_FLAGS) in front of NSD is warmed with N names, then
# dnsperf asks 5,000 q/s drawn at random from them; 6 s in, the serving
# process is SIGKILLed. The hit ratio comes from /metrics, read every
# 200 ms: the second before the kill, and the new process's first second.
#
#   bench/journal.sh [N...]          # default: 20000 30000 60000 100000
#   BENCH_NODECACHE_FLAGS=--cache-journal-size=16MiB bench/journal.sh 100000
#
# Needs root for nothing; traffic stays on 127.0.0.1. Prints one line per N.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
NODECACHE=${NODECACHE_BIN:-$ROOT/bin/nodecache}
ZONE=bench.example.
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(20000 30000 60000 100000)
WORK=$(mktemp -d /tmp/nodecache-journal.XXXXXX)
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
trap 'stop_all; rm -rf "$WORK"' EXIT
for t in dnsperf nsd dig curl shuf; do command -v "$t" >/dev/null || die "$t not installed"; done
[ -x "$NODECACHE" ] || die "$NODECACHE missing: run make build"

max=$(printf '%s\n' "${SIZES[@]}" | sort -n | tail -1)
mkdir -p "$WORK/nsd"
write_zone "$WORK/nsd/zone" "$max"
NSD_PORT=$(free_port)
write_nsd_conf "$WORK/nsd" "$NSD_PORT" "$WORK/nsd/zone"
start nsd 1 nsd -d -c "$WORK/nsd/nsd.conf"
wait_dns "$NSD_PORT" "n$((max - 1)).$ZONE" A NOERROR 60

# counters PORT: "hits misses journal_bytes" from the agent's /metrics.
counters() {
  curl -s "http://127.0.0.1:$1/metrics" | awk '$1 == "nodecache_cache_hits_total" { h = $2 }
    $1 == "nodecache_cache_misses_total" { m = $2 } $1 == "nodecache_cache_journal_bytes" { j = $2 }
    END { print h + 0, m + 0, j + 0 }'
}

for n in "${SIZES[@]}"; do
  d=$WORK/n$n
  mkdir -p "$d"
  awk -v n="$n" -v z="$ZONE" 'BEGIN { for (i = 0; i < n; i++) printf "n%d.%s A\n", i, z }' >"$d/names"
  shuf "$d/names" >"$d/random"
  port=$(free_port); mport=$(free_port)
  # shellcheck disable=SC2086
  start "nodecache-$n" 0 "$NODECACHE" run --local-ip 127.0.0.1 --port "$port" --setup-interface=false \
    --setup-iptables=false --cache-size 64MiB --health-addr "127.0.0.1:$(free_port)" --metrics-addr "127.0.0.1:$mport" \
    --log-level info --admin-socket "$d/admin.sock" --handover-socket "$d/handover.sock" \
    --upstream "127.0.0.1:$NSD_PORT" ${BENCH_NODECACHE_FLAGS:-}
  pid=$PID
  wait_dns "$port" "n1.$ZONE" A NOERROR
  dnsperf -s 127.0.0.1 -p "$port" -d "$d/names" -n 1 -q 100 -Q 20000 >"$d/warm" 2>&1
  sleep 1
  (while kill -0 "$pid" 2>/dev/null; do echo "$(date +%s.%N) $(counters "$mport")"; sleep 0.2; done >"$d/samples") &
  sampler=$!
  dnsperf -s 127.0.0.1 -p "$port" -d "$d/random" -l 14 -q 100 -Q 5000 >"$d/steady" 2>&1 &
  load=$!
  sleep 6
  serving=$(cat /proc/"$pid"/task/*/children)
  [ -n "$serving" ] || die "no serving process under $pid (is --supervise off?)"
  kill -KILL "$serving"
  killed=$(date +%s.%N)
  wait "$load" || true
  stop "$pid"
  wait "$sampler" || true
  awk -v kt="$killed" -v n="$n" '
    { t = $1; h = $2; m = $3
      if (t <= kt - 1) { bh = h; bm = m }
      if (t <= kt) { kh = h; km = m; kj = $4 }
      if (t > kt && h + m < ph + pm && !rs) rs = t       # the counters restarted: the new process
      if (rs && t <= rs + 1) { ah = h; am = m }
      ph = h; pm = m }
    END { printf "N=%d: journal %.1f MiB; hit ratio %.3f in the second before the kill (%d lookups), %.3f in the new process'"'"'s first second (%d lookups)", n, kj / 1048576,
      (kh - bh) / ((kh - bh) + (km - bm)), (kh - bh) + (km - bm), (ah + am) ? ah / (ah + am) : 0, ah + am }' "$d/samples"
  sed -n 's/.*msg="restored the cache from the journal" \(entries=[0-9]* records=[0-9]*\).* took=\([^ ]*\).*/; restored \1 in \2/p' \
    "$WORK/nodecache-$n.log" | head -1
  echo
done
