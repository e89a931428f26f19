#!/usr/bin/env bash
# missab.sh BIN... [coredns]: interleaved miss runs of several nodecache
# binaries (and CoreDNS, "coredns", with bench/run.sh's Corefile) on one
# machine, for before/after comparisons of the miss path on a busy machine,
# where one run of CPU per answer moves by ±25 %. Every server serves at
# once (pinned to CPU 0; NSD and dnsperf on CPU 1, as bench/run.sh), each
# warmed with 100,000 names as run.sh warms; each round then loads them in
# turn (the order rotating every round) with run.sh's miss phase (dnsperf,
# 100 outstanding) on 30,000 names none of them was asked before (a
# wildcard in NSD's zone answers them). It prints the server tree's CPU µs
# per answer (utime+stime of /proc/PID/stat, as run.sh), perf stat's
# context switches and system calls per answer, and each server's median
# over the rounds, its spread (lowest-highest), the median's ratio to
# CoreDNS's, and the median of the per-round ratios to the first argument.
#
#   MISSAB_ROUNDS=8 bench/missab.sh /tmp/nc.before bin/nodecache coredns
#   bench/missab.sh bin/nodecache bin/nodecache,--supervise=false   # BIN,FLAG...: flags of that one
#
# MISSAB_ROUNDS (8; CoreDNS's cache of 400,000 entries holds the 100,000
# warmed and 9 rounds of misses), MISSAB_SECONDS (5: the limit of one run).
# With MISSAB_PROFILE_DIR set, a last round takes a CPU profile of each
# nodecache's miss run into that directory (miss.N.pprof and its
# `go tool pprof -top`), outside the rounds measured.
#
# Needs root (nice, perf stat -p), dnsperf, nsd, perf, taskset.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${MISSAB_ROUNDS:-8}
PHASE=${MISSAB_SECONDS:-5}
[ $# -ge 1 ] || { echo "usage: $0 BIN[,FLAG...]|coredns..." >&2; exit 2; }
WORK=$(mktemp -d /tmp/nodecache-missab.XXXXXX)
ZONE=bench.example.
NAMES=100000 # n0..n99999 warmed; the misses are names under the wildcard
SLICE=30000  # names per miss run
CACHE_SIZE=256MiB
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
trap 'stop_all; rm -rf "$WORK"' EXIT
for t in dnsperf nsd perf taskset; do command -v "$t" >/dev/null || die "$t not installed"; done
COREDNS=
for b in "$@"; do
  if [ "$b" = coredns ]; then COREDNS=$("$ROOT/bench/build-coredns.sh") || die "building CoreDNS"; fi
done

mkdir -p "$WORK/nsd"
write_zone "$WORK/nsd/zone" "$NAMES"
echo "*.w IN A 10.9.9.9" >>"$WORK/nsd/zone"
names() { awk -v a="$1" -v b="$2" -v z="$ZONE" 'BEGIN { for (i = a; i < b; i++) printf "n%d.%s A\n", i, z }'; }
names 0 "$NAMES" >"$WORK/warm.txt"
NSD_PORT=$(free_port)
write_nsd_conf "$WORK/nsd" "$NSD_PORT" "$WORK/nsd/zone"
start nsd 1 nsd -d -c "$WORK/nsd/nsd.conf"
wait_dns "$NSD_PORT" "n$((NAMES - 1)).$ZONE" A NOERROR 60

# serve I ARG PPROFPORT: starts argument I (a BIN,FLAG... or coredns),
# waits for its first answer, warms it and sets PID and PORT.
serve() {
  local i=$1 b=$2 pport=${3:-} d=$WORK/s.$1
  PORT=$(free_port)
  mkdir -p "$d"
  if [ "$b" = coredns ]; then
    write_corefile_forward "$d/Corefile" "$PORT" "$NSD_PORT" "$(free_port)"
    start "coredns.$i" 0 "$COREDNS" -conf "$d/Corefile"
  else
    local bflags pprof=()
    IFS=, read -r -a bflags <<<"$b"
    [ -z "$pport" ] || pprof=(--pprof=true --pprof-addr "127.0.0.1:$pport")
    start "nc.$i" 0 "${bflags[0]}" run "${bflags[@]:1}" --local-ip 127.0.0.1 --port "$PORT" \
      --setup-interface=false --setup-iptables=false --cache-size "$CACHE_SIZE" \
      --health-addr "127.0.0.1:$(free_port)" --log-level warn --admin-socket "$d/admin.sock" \
      --handover-socket "$d/handover.sock" --upstream "127.0.0.1:$NSD_PORT" \
      --metrics-addr "127.0.0.1:$(free_port)" "${pprof[@]}"
  fi
  wait_dns "$PORT" "n1.$ZONE" A NOERROR
  taskset -c 1 "${PRIO[@]}" dnsperf -s 127.0.0.1 -p "$PORT" -d "$WORK/warm.txt" -n 1 -l 120 -q 50 \
    >/dev/null 2>&1 || die "warming $b"
}

# missfile R I: run R's names for argument I, under the zone's wildcard.
missfile() {
  local f=$WORK/miss.$1.$2
  awk -v r="$1" -v i="$2" -v n=$SLICE -v z="$ZONE" \
    'BEGIN { for (k = 0; k < n; k++) printf "r%di%dn%d.w.%s A\n", r, i, k, z }' >"$f"
  echo "$f"
}

args=("$@")
n=$#
pids=() ports=()
for i in $(seq 0 $((n - 1))); do
  serve "$i" "${args[$i]}"
  pids+=("$PID"); ports+=("$PORT")
done
wait_dns "${ports[0]}" "x.w.$ZONE" A NOERROR

events=context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_sendto,syscalls:sys_enter_sendmmsg
for r in $(seq "$ROUNDS"); do
  for k in $(seq 0 $((n - 1))); do
    i=$(((k + r - 1) % n))
    b=${args[$i]}
    f=$(missfile "$r" "$i")
    perf stat -x, -e "$events" -p "$(tree_pids "${pids[$i]}" | paste -sd,)" -o "$WORK/perf.$r.$i" -- \
      sleep $((PHASE + 2)) &
    pstat=$!
    # the miss phase of bench/run.sh (dnsperf_run ... -n 1 -l PHASE -q 100)
    dnsperf_run "${pids[$i]}" "${ports[$i]}" "$f" -n 1 -l "$PHASE" -q 100
    kill -INT "$pstat" 2>/dev/null || true
    wait "$pstat" || true
    echo "$r $i $CPU_US $QPS $DONE" >>"$WORK/runs"
    awk -F, -v n="$DONE" -v name="$b" -v r="$r" -v cpu="$CPU_US" -v qps="$QPS" '
      /context-switches/ {cs = $1} /raw_syscalls/ {sc = $1} /sendto/ {st = $1} /sendmmsg/ {sm = $1}
      END { printf "round %d %-40s qps %6d  cpu %5.1f us/answer  per answer: %.2f context switches %.2f syscalls %.3f sendto %.3f sendmmsg\n",
        r, name, qps, cpu, cs / n, sc / n, st / n, sm / n }' "$WORK/perf.$r.$i"
  done
done

echo
echo "CPU µs per answer over $ROUNDS rounds: median, lowest-highest, median ÷ CoreDNS's median, median of the rounds' ratios to ${args[0]}:"
cdn=
for i in $(seq 0 $((n - 1))); do
  if [ "${args[$i]}" = coredns ]; then
    cdn=$(awk -v i="$i" '$2 == i {print $3}' "$WORK/runs" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
  fi
done
for i in $(seq 0 $((n - 1))); do
  rel=$(awk -v i="$i" '$2 == 0 {a[$1] = $3} $2 == i {b[$1] = $3} END {for (r in b) if (a[r] > 0) print b[r] / a[r]}' "$WORK/runs" |
    sort -g | awk '{v[NR] = $1} END {printf "%.3f", v[int((NR + 1) / 2)]}')
  awk -v i="$i" '$2 == i {print $3}' "$WORK/runs" | sort -g |
    awk -v name="${args[$i]}" -v c="${cdn:-0}" -v rel="$rel" '{v[NR] = $1; s = s sep $1; sep = " "}
      END { m = v[int((NR + 1) / 2)]; printf "%-40s median %5.1f  spread %s-%s", name, m, v[1], v[NR]
            if (c > 0) printf "  ÷ CoreDNS %.3f", m / c
            printf "  ÷ first (per round) %s  (sorted: %s)\n", rel, s }'
done

if [ -n "${MISSAB_PROFILE_DIR:-}" ]; then
  mkdir -p "$MISSAB_PROFILE_DIR"
  stop_all
  start nsd 1 nsd -d -c "$WORK/nsd/nsd.conf"
  wait_dns "$NSD_PORT" "n1.$ZONE" A NOERROR 60
  for i in $(seq 0 $((n - 1))); do
    b=${args[$i]}
    [ "$b" != coredns ] || continue
    pport=$(free_port)
    serve "$i" "$b" "$pport"
    out=$MISSAB_PROFILE_DIR/miss.$i
    curl -sf -o "$out.pprof" "http://127.0.0.1:$pport/debug/pprof/profile?seconds=$PHASE" &
    c=$!
    sleep 0.3
    dnsperf_run "$PID" "$PORT" "$(missfile 0 "$i")" -n 1 -l "$PHASE" -q 100
    wait "$c" || log "no profile from $b"
    stop "$PID"
    go tool pprof -top -nodecount=60 "${b%%,*}" "$out.pprof" >"$out.top.txt" 2>/dev/null || true
    log "profile of $b: $out.pprof, $out.top.txt"
  done
fi
