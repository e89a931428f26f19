#!/usr/bin/env bash
# The restart after a crash, two binaries interleaved: a supervised
# nodecache of each (127.0.0.1, no interface or rules, the demo fixture as
# its zone with --zone-snapshot, NSD upstream) is warmed with NAMES names
# (the cache journal's records), then `benchtool restart` SIGKILLs each
# one's serving process in turn, ROUNDS times, asking the fixture's
# web.demo.svc.cluster.local until the first answer. Per binary it prints
# the medians (and ranges) of: the first answer after the kill, the CPU
# the new serving process had used by then (all threads, schedstat), and
# the phases of its "reading the kept sockets" line (exec_init, build,
# listeners, cpu_time); then the last serving process's peak and current
# RSS (VmHWM, VmRSS).
#
#   bench/restart.sh BIN_A BIN_B      # RESTART_ROUNDS=10 RESTART_NAMES=2000
#
# RESTART_KUBECONFIG=F takes the zone from F's API server instead of the
# fixture (with an unreachable one the zone is the snapshot's, written by a
# first run with the fixture); RESTART_NAME=N asks N instead (say
# n1.bench.example., a cached name that waits for the journal's import).
#
# Needs root for nothing; traffic stays on 127.0.0.1. Wrap it in
# `flock /tmp/nodecache-bench.lock` on a shared machine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 2 ] || { echo "usage: $0 BIN_A BIN_B" >&2; exit 2; }
BINS=("$1" "$2")
ROUNDS=${RESTART_ROUNDS:-10}
NAMES=${RESTART_NAMES:-2000}
ZONE=bench.example.
WORK=$(mktemp -d /tmp/nodecache-restart.XXXXXX)
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
# RESTART_KEEP=1 keeps the work directory (the agents' logs) and names it.
trap 'stop_all; if [ -n "${RESTART_KEEP:-}" ]; then log "kept $WORK"; else rm -rf "$WORK"; fi' EXIT
for t in dnsperf nsd dig go; do command -v "$t" >/dev/null || die "$t not installed"; done
for b in "${BINS[@]}"; do [ -x "$b" ] || die "$b missing"; done
(cd "$ROOT" && go build -o "$WORK/benchtool" ./bench/benchtool)

mkdir -p "$WORK/nsd"
write_zone "$WORK/nsd/zone" "$NAMES"
NSD_PORT=$(free_port)
write_nsd_conf "$WORK/nsd" "$NSD_PORT" "$WORK/nsd/zone"
nsd -d -c "$WORK/nsd/nsd.conf" >"$WORK/nsd.log" 2>&1 &
PIDS+=("$!")
wait_dns "$NSD_PORT" "n$((NAMES - 1)).$ZONE" A NOERROR 60
awk -v n="$NAMES" -v z="$ZONE" 'BEGIN { for (i = 0; i < n; i++) printf "n%d.%s A\n", i, z }' >"$WORK/names"

sups=() servers=()
for i in 0 1; do
  d=$WORK/agent$i
  mkdir -p "$d"
  port=$(free_port)
  # Unpinned and not reniced: the restart competes for the CPU as it would.
  zone=(--fixture "$ROOT/deploy/examples/fixture.yaml")
  if [ -n "${RESTART_KUBECONFIG:-}" ]; then
    # the snapshot of the fixture's zone, for the names the API server does not answer
    "${BINS[$i]}" run --local-ip 127.0.0.1 --port "$(free_port)" --setup-interface=false --setup-iptables=false \
      --supervise=false --health-addr "127.0.0.1:$(free_port)" --metrics-addr "127.0.0.1:$(free_port)" \
      --admin-socket "$d/admin0.sock" --handover-socket "$d/handover0.sock" "${zone[@]}" \
      --zone-snapshot "$d/zone.snap" >"$d/log0" 2>&1 &
    snap=$!
    for _ in $(seq 100); do [ -s "$d/zone.snap" ] && break; sleep 0.1; done
    stop "$snap"
    zone=(--kubeconfig "$RESTART_KUBECONFIG")
  fi
  "${BINS[$i]}" run --local-ip 127.0.0.1 --port "$port" --setup-interface=false --setup-iptables=false \
    --health-addr "127.0.0.1:$(free_port)" --metrics-addr "127.0.0.1:$(free_port)" --log-level info \
    --admin-socket "$d/admin.sock" --handover-socket "$d/handover.sock" --upstream "127.0.0.1:$NSD_PORT" \
    "${zone[@]}" --zone-snapshot "$d/zone.snap" >"$d/log" 2>&1 &
  PIDS+=("$!")
  sups+=("$!") servers+=("127.0.0.1:$port")
  wait_dns "$port" n1.$ZONE A NOERROR
  dnsperf -s 127.0.0.1 -p "$port" -d "$WORK/names" -n 1 -q 100 -Q 20000 >"$d/warm" 2>&1
done
sleep 11 # the first serving processes live 10 s: their deaths are not a crash loop
log "killing each serving process $ROUNDS times, interleaved"
"$WORK/benchtool" restart -supervisors "${sups[0]},${sups[1]}" -servers "${servers[0]},${servers[1]}" \
  -name "${RESTART_NAME:-web.demo.svc.cluster.local}" -rounds "$ROUNDS" | tee "$WORK/samples"

# stat FILE KEY: "median (min-max, n)" of KEY=value over FILE's lines, in ms
# (a Go duration such as 800µs or 1.2s is converted; a bare number is ms).
stat() {
  grep -o "$2=\"\{0,1\}[0-9.]*[µm]\{0,1\}s\{0,1\}" "$1" | sed 's/^[^=]*=//; s/"//' |
    awk '{ v = $1 + 0; if ($1 ~ /µs$/) v /= 1000; else if ($1 ~ /[0-9]s$/) v *= 1000; print v }' | sort -g |
    awk '{ v[NR] = $1 } END { if (NR) printf "%s (%s-%s, n=%d)", v[int((NR + 1) / 2)], v[1], v[NR], NR; else printf "none" }'
}
for i in 0 1; do
  grep "agent=$i " "$WORK/samples" >"$WORK/s$i"
  grep 'reading the kept sockets' "$WORK/agent$i/log" >"$WORK/r$i" || true
  echo "${BINS[$i]}: first_answer_ms $(stat "$WORK/s$i" first_answer_ms); cpu_ms $(stat "$WORK/s$i" cpu_ms);" \
    "exec_init $(stat "$WORK/r$i" exec_init); build $(stat "$WORK/r$i" build);" \
    "listeners $(stat "$WORK/r$i" listeners); cpu_time $(stat "$WORK/r$i" cpu_time);" \
    "last serving process: $(grep -h '^Vm\(HWM\|RSS\)' /proc/"$(cat /proc/"${sups[$i]}"/task/*/children | tr -d ' ')"/status | tr -s ' \t' ' ' | paste -sd ' ')"
done
