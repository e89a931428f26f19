#!/usr/bin/env bash
# hitab.sh BIN...: interleaved cache-hit runs of several nodecache binaries
# (and "floor", bench/floor) on one machine, for before/after comparisons
# on a busy machine, where one run of CPU per answer moves by ±20 %: every
# binary serves at once (pinned to CPU 0, each warmed once), and the rounds
# load them in turn with dnsperf (CPU 1, as bench/run.sh: 4 clients, 500
# outstanding). perf stat counts each run over the server's whole process
# tree (every thread) and prints task-clock µs per answer, and the
# root process's part of it (the supervisor; the server itself with --supervise=false); context switches, system calls, recvmmsg and
# epoll_pwait per 1000 answers.
#
#   HITAB_ROUNDS=5 HITAB_SECONDS=5 bench/hitab.sh /tmp/nc.before bin/nodecache floor
#   bench/hitab.sh bin/nodecache bin/nodecache,--supervise=false   # BIN,FLAG...: flags of that one
#
# With HITAB_RATE=10000 each round also runs `benchtool latency` at that
# fixed rate against each binary (p50/p90/p99/p99.9 of answered queries, as
# bench/run.sh's latency rows), and the end prints each one's median of the
# rounds' percentiles and every round's p99. HITAB_MAXQPS=0 leaves out the
# max-QPS runs (the latency runs only: more rounds in the same minutes).
# The order of the servers rotates every round, as run.sh's rounds do.
# "unbound" is Unbound (1 thread, run.sh's configuration) among them:
#
#   HITAB_RATE=10000 HITAB_MAXQPS=0 HITAB_ROUNDS=20 HITAB_SECONDS=3 bench/hitab.sh bin/nodecache unbound floor
#
# HITAB_PRIO="chrt -f 20" starts everything at SCHED_FIFO instead of nice -10.
#
# Needs root (perf stat -p, nice), dnsperf, nsd, perf, taskset, cc (and unbound
# when named).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${HITAB_ROUNDS:-5}
PHASE=${HITAB_SECONDS:-5}
[ $# -ge 1 ] || { echo "usage: $0 BIN|floor..." >&2; exit 2; }
WORK=$(mktemp -d /tmp/nodecache-hitab.XXXXXX)
ZONE=bench.example.
CACHE_SIZE=256MiB
CACHE_SIZE_UNBOUND=256m
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
# HITAB_PRIO="chrt -f 20": what every process of the run is started under
# instead of nice -10 (servers, NSD, dnsperf, the latency client): at
# SCHED_FIFO the other processes of a shared machine do not run in between.
if [ -n "${HITAB_PRIO:-}" ]; then read -r -a PRIO <<<"$HITAB_PRIO"; fi
trap 'stop_all; rm -rf "$WORK"' EXIT
for t in dnsperf nsd perf taskset cc; do command -v "$t" >/dev/null || die "$t not installed"; done
cc -O2 -o "$WORK/floor" "$ROOT/bench/floor/floor.c" || die "building bench/floor"
BENCHTOOL=$WORK/benchtool
if [ -n "${HITAB_RATE:-}" ]; then
  (cd "$ROOT" && go build -o "$BENCHTOOL" ./bench/benchtool) || die "building benchtool"
fi

mkdir -p "$WORK/nsd"
{
  printf '$ORIGIN %s\n$TTL 3600\n' "$ZONE"
  printf '@ IN SOA ns hostmaster 1 7200 1800 86400 3600\n@ IN NS ns\nns IN A 127.0.0.1\n'
  awk 'BEGIN { for (i = 0; i < 10000; i++) printf "n%d IN A 10.0.%d.%d\n", i, int(i / 256) % 256, i % 256 }'
} >"$WORK/nsd/zone"
awk -v z=$ZONE 'BEGIN { for (i = 0; i < 10000; i++) printf "n%d.%s A\n", i, z }' >"$WORK/hit.txt"
NSD_PORT=$(free_port)
write_nsd_conf "$WORK/nsd" "$NSD_PORT" "$WORK/nsd/zone"
start nsd 1 nsd -d -c "$WORK/nsd/nsd.conf"
wait_dns "$NSD_PORT" "n1.$ZONE" A NOERROR 60

pids=() ports=()
i=0
for b in "$@"; do
  port=$(free_port)
  if [ "$b" = floor ]; then
    start "floor.$i" 0 "$WORK/floor" 127.0.0.1 "$port"
  elif [ "$b" = unbound ]; then
    mkdir -p "$WORK/unbound.$i"
    write_unbound_conf "$WORK/unbound.$i/unbound.conf" "$WORK/unbound.$i" "$port" "$NSD_PORT"
    start "unbound.$i" 0 unbound -d -c "$WORK/unbound.$i/unbound.conf"
  else
    d=$WORK/nc.$i
    mkdir -p "$d"
    IFS=, read -r -a bflags <<<"$b" # BIN,--flag,--flag: the binary, then flags of its own
    start "nc.$i" 0 "${bflags[0]}" run "${bflags[@]:1}" --local-ip 127.0.0.1 --port "$port" --setup-interface=false --setup-iptables=false \
      --cache-size "$CACHE_SIZE" --health-addr "127.0.0.1:$(free_port)" --log-level warn \
      --admin-socket "$d/admin.sock" --handover-socket "$d/handover.sock" --upstream "127.0.0.1:$NSD_PORT" \
      --metrics-addr "127.0.0.1:$(free_port)"
  fi
  pids+=("$PID"); ports+=("$port")
  wait_dns "$port" "n1.$ZONE" A NOERROR
  taskset -c 1 dnsperf -s 127.0.0.1 -p "$port" -d "$WORK/hit.txt" -n 1 -q 50 >/dev/null 2>&1 || die "warming $b"
  i=$((i + 1))
done

events=task-clock,context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_recvmmsg,syscalls:sys_enter_epoll_pwait
declare -A lat # lat[i|pct] = " v1 v2 ..." in round order
n=$#
servers=("$@")
for r in $(seq "$ROUNDS"); do
  for ((k = 0; k < n; k++)); do
    i=$(((k + r - 1) % n))
    b=${servers[$i]}
    if [ "${HITAB_MAXQPS:-1}" != 0 ]; then
      out=$WORK/dnsperf.$r.$i tree=$WORK/tree.$r.$i root=$WORK/root.$r.$i
      perf stat -x, -e task-clock -p "${pids[$i]}" -o "$root" -- sleep $((PHASE + 1)) &
      rootstat=$!
      perf stat -x, -e "$events" -p "$(tree_pids "${pids[$i]}" | paste -sd,)" -o "$tree" -- \
        taskset -c 1 "${PRIO[@]}" dnsperf -s 127.0.0.1 -p "${ports[$i]}" -d "$WORK/hit.txt" -T 1 -c 4 -q 500 -t 2 \
        -l "$PHASE" >"$out" 2>&1 || die "dnsperf: $(tail -3 "$out")"
      wait "$rootstat" || true
      nq=$(awk '/Queries completed:/ {print $3}' "$out")
      qps=$(awk '/Queries per second:/ {printf "%.0f", $4}' "$out")
      lost=$(awk '/Queries lost:/ {print $3}' "$out")
      sup=0
      case $b in floor | unbound) ;; *) sup=$(awk -F, '/task-clock/ {print $1}' "$root") ;; esac
      awk -F, -v n="$nq" -v qps="$qps" -v lost="$lost" -v name="$b" -v r="$r" -v sup="$sup" '
        /task-clock/ {tc = $1} /context-switches/ {cs = $1} /raw_syscalls/ {sc = $1}
        /recvmmsg/ {rv = $1} /epoll_pwait/ {ep = $1}
        END { printf "round %d %-28s qps %7d (lost %d)  cpu %.2f us/answer (root process %.2f)  per 1000 answers: %6.1f context switches %6.1f syscalls %6.1f recvmmsg %6.1f epoll_pwait\n",
          r, name, qps, lost, tc * 1000 / n, sup * 1000 / n, cs * 1000 / n, sc * 1000 / n, rv * 1000 / n, ep * 1000 / n }' "$tree"
    fi
    if [ -n "${HITAB_RATE:-}" ]; then
      latency_run "${pids[$i]}" "${ports[$i]}" "$WORK/hit.txt" "$HITAB_RATE"
      printf 'round %d %-28s at %d qps: p50 %s us  p90 %s us  p99 %s us  p99.9 %s us  lost %s %%  cpu %s us/answer\n' \
        "$r" "$b" "$HITAB_RATE" "$P50" "$P90" "$P99" "$P999" "$LOST_PCT" "$LCPU_US"
      lat[$i|p50]+=" $P50"; lat[$i|p90]+=" $P90"; lat[$i|p99]+=" $P99"; lat[$i|p999]+=" $P999"
    fi
  done
done
if [ -n "${HITAB_RATE:-}" ]; then
  echo "at $HITAB_RATE qps, median of $ROUNDS rounds (each round's p99 in round order):"
  for ((i = 0; i < n; i++)); do
    # shellcheck disable=SC2086 # the lists split on purpose
    printf '  %-28s p50 %s  p90 %s  p99 %s  p99.9 %s us  | p99s:%s\n' "${servers[$i]}" \
      "$(median ${lat[$i|p50]})" "$(median ${lat[$i|p90]})" "$(median ${lat[$i|p99]})" "$(median ${lat[$i|p999]})" "${lat[$i|p99]}"
  done
fi
