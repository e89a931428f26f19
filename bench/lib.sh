# shellcheck shell=bash
# Helpers of bench/run.sh: processes, ports, measurements, server configs.
# Sourced, not run. Every process started here is recorded in PIDS and
# stopped by stop_all (run.sh traps EXIT).

PIDS=()
CLK_TCK=$(getconf CLK_TCK)
# As root, everything the run starts gets nice -10: the machine may be
# shared, and a compile job preempting a pinned server shows up as tail
# latency that is not the server's.
PRIO=()
if [ "$(id -u)" = 0 ]; then PRIO=(nice -n -10); fi

log() { printf '[bench %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "FATAL: $*"; exit 1; }

# start NAME CPU CMD...: runs CMD pinned to CPU, output in $WORK/NAME.log,
# and sets PID.
start() {
  local name=$1 cpu=$2; shift 2
  taskset -c "$cpu" "${PRIO[@]}" "$@" >"$WORK/$name.log" 2>&1 &
  PID=$!
  PIDS+=("$PID")
  log "started $name (pid $PID, cpu $cpu): $*"
}

# stop PID: SIGTERM, then SIGKILL after 10 s; waits for it.
stop() {
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

stop_all() {
  local p
  for p in "${PIDS[@]}"; do stop "$p"; done
  PIDS=()
}

# free_port: a port free on 127.0.0.1 for both UDP and TCP.
free_port() {
  local p i lo
  # below the kernel's ephemeral range, whose ports the API server's and
  # etcd's own connections take at any moment (a listener cannot bind a
  # port a connected socket holds: CoreDNS failed so once), and unused by
  # any socket, listening or not
  lo=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  for i in $(seq 200); do
    p=$((10000 + RANDOM % (lo - 10000)))
    if [ -z "$(ss -Hanu "sport = :$p")" ] && [ -z "$(ss -Hant "sport = :$p")" ]; then
      echo "$p"; return 0
    fi
  done
  die "no free port"
}

# wait_dns PORT NAME TYPE RCODE [SECONDS]: polls until NAME TYPE gets RCODE.
wait_dns() {
  local port=$1 name=$2 type=$3 want=$4 secs=${5:-60} i got
  for i in $(seq $((secs * 5))); do
    got=$(dig +time=1 +tries=1 @127.0.0.1 -p "$port" "$name" "$type" 2>/dev/null |
      sed -n 's/.*status: \([A-Z]*\),.*/\1/p' || true)
    [ "$got" = "$want" ] && return 0
    sleep 0.2
  done
  die "127.0.0.1:$port never answered $name $type with $want (last: ${got:-nothing})"
}

# tree_pids PID: PID and every live descendant. nodecache's PID is its
# supervisor, which starts the serving process as a child; a server's cost
# is that of its whole tree.
tree_pids() {
  local c
  echo "$1"
  for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do tree_pids "$c"; done
}

# cpu_ticks PID: CPU time of PID's tree in clock ticks: utime+stime of PID
# and each live descendant (fields 14 and 15 of /proc/PID/stat, counted
# after the ")" closing the command name), plus PID's cutime+cstime (16
# and 17: children it has already reaped, such as a serving process that
# crashed).
cpu_ticks() {
  local p t=0 v
  for p in $(tree_pids "$1"); do
    v=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk -v root=$((p == $1)) '{print $12 + $13 + root * ($14 + $15)}')
    t=$((t + ${v:-0}))
  done
  echo "$t"
}

# rss_kib PID: VmRSS of PID's tree in KiB, the kernel's own unit, plus the
# memfd files the tree holds (the cache journal the supervisor keeps is
# memory that no VmRSS shows), each counted once.
rss_kib() { echo $(($(tree_field_kib "$1" status VmRSS) + $(memfd_kib "$1"))); }

# pss_kib PID: like rss_kib, with each process's Pss instead of its VmRSS:
# pages the tree's processes share (the binary's code pages, which a
# supervisor in the nodecache process shares with the serving process;
# nodecache-supervisor's own binary shares none) count once, split between
# them.
pss_kib() { echo $(($(tree_field_kib "$1" smaps_rollup Pss) + $(memfd_kib "$1"))); }

# tree_field_kib PID FILE FIELD: the sum of FIELD (in kB) of /proc/P/FILE
# over PID's tree.
tree_field_kib() {
  local p t=0 v
  for p in $(tree_pids "$1"); do
    v=$(awk -v f="$3:" '$1 == f {print $2}' "/proc/$p/$2" 2>/dev/null)
    t=$((t + ${v:-0}))
  done
  echo "$t"
}

# memfd_kib PID: the memfd files PID's tree holds, each counted once.
memfd_kib() {
  local p f
  for p in $(tree_pids "$1"); do
    for f in /proc/"$p"/fd/*; do
      case $(readlink "$f" 2>/dev/null) in /memfd:*) stat -L -c '%i %b %B' "$f" 2>/dev/null ;; esac
    done
  done | sort -u | awk '{k += $2 * $3 / 1024} END {printf "%.0f", k}'
}

# rss_mib PID: rss_kib in MiB.
rss_mib() { awk -v k="$(rss_kib "$1")" 'BEGIN {printf "%.0f", k / 1024}'; }

# metric_mib PORT NAME: the value of the unlabelled Prometheus metric NAME
# on 127.0.0.1:PORT/metrics, in MiB with one decimal.
metric_mib() {
  curl -sf "http://127.0.0.1:$1/metrics" |
    awk -v n="$2" '$1 == n { printf "%.1f", $2 / 1048576; found = 1 } END { exit !found }' ||
    die "no $2 on 127.0.0.1:$1/metrics"
}

# dnsperf_run PID PORT FILE ARGS...: runs dnsperf on CPU 1 against PORT and
# sets QPS, DONE (answers), LOST, CPU_US (server CPU µs per answer) and
# AVG_US (dnsperf's mean latency).
dnsperf_run() {
  local pid=$1 port=$2 file=$3 out t0 t1; shift 3
  out="$WORK/dnsperf.$(date +%s%N).txt"
  t0=$(cpu_ticks "$pid")
  taskset -c 1 "${PRIO[@]}" dnsperf -s 127.0.0.1 -p "$port" -d "$file" -T 1 -c 4 -q 500 -t 2 "$@" >"$out" 2>&1 ||
    die "dnsperf failed: $(tail -5 "$out")"
  t1=$(cpu_ticks "$pid")
  QPS=$(awk '/Queries per second:/ {printf "%.0f", $4}' "$out")
  DONE=$(awk '/Queries completed:/ {print $3}' "$out")
  LOST=$(awk '/Queries lost:/ {print $3}' "$out")
  AVG_US=$(awk '/Average Latency/ {printf "%.0f", $4 * 1e6}' "$out")
  CPU_US=$(awk -v d=$((t1 - t0)) -v hz="$CLK_TCK" -v n="${DONE:-0}" \
    'BEGIN { if (n > 0) printf "%.1f", d / hz * 1e6 / n; else print "n/a" }')
  log "dnsperf $(basename "$file") $*: qps=$QPS answers=$DONE lost=$LOST cpu/answer=${CPU_US}us avg=${AVG_US}us"
}

# dnsperf_median PID PORT FILE DNSPERF-ARGS...: $REPEAT runs of dnsperf_run;
# sets QPS and CPU_US to those of the run with the median CPU per answer,
# and RUNS to every run's CPU per answer in order ("5.8 6.4 6.1"). One run
# on this shared VM moves by ±10 %; the median of three holds still. A %i
# in FILE is the run's number (0, 1, ...): runs that must not share names.
dnsperf_median() {
  local i runs=() pid=$1 port=$2 file=$3
  shift 3
  for ((i = 0; i < REPEAT; i++)); do
    dnsperf_run "$pid" "$port" "${file//%i/$i}" "$@"
    runs+=("$CPU_US $QPS")
  done
  median_run "${runs[@]}"
  CPU_US=${MID% *}; QPS=${MID#* }; RUNS=$MIDRUNS
}

# median_run "CPU QPS"...: sets MID to the run with the median CPU (the
# lower middle of an even count) and MIDRUNS to every run's CPU in order.
median_run() {
  MID=$(printf '%s\n' "$@" | sort -g | sed -n "$((($# + 1) / 2))p")
  MIDRUNS=$(printf '%s\n' "$@" | awk '{ printf "%s%s", sep, $1; sep = " " }')
}

# ratio A B: A/B with two decimals, or "–" when either is not a number.
ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.2f", a / b; else printf "–" }'
}

# latency_run PID PORT FILE RATE: fixed-rate load from benchtool on CPU 1;
# sets P50 P90 P99 P999 (µs, of answered queries), LOST_PCT and LCPU_US (server
# CPU µs per answer at that rate). The log line adds the UDP datagrams the
# kernel dropped at full socket buffers meanwhile (any socket).
latency_run() {
  local pid=$1 port=$2 file=$3 rate=$4 out t0 t1 d0 d1
  t0=$(cpu_ticks "$pid"); d0=$(udp_rcvbuf_errors)
  out=$(taskset -c 1 "${PRIO[@]}" "$BENCHTOOL" latency -server "127.0.0.1:$port" -queries "$file" \
    -rate "$rate" -duration "${PHASE}s" -max-queries $((rate * PHASE))) || die "benchtool latency failed"
  t1=$(cpu_ticks "$pid"); d1=$(udp_rcvbuf_errors)
  log "latency $(basename "$file") @${rate}qps: $out udp_rcvbuf_drops=$((d1 - d0))"
  P50=$(kv p50_us "$out"); P90=$(kv p90_us "$out"); P99=$(kv p99_us "$out"); P999=$(kv p999_us "$out"); LOST_PCT=$(kv lost_pct "$out")
  LCPU_US=$(awk -v d=$((t1 - t0)) -v hz="$CLK_TCK" -v n="$(kv answered "$out")" \
    'BEGIN { if (n > 0) printf "%.1f", d / hz * 1e6 / n; else print "n/a" }')
}

# median X...: the middle value (the lower middle of an even count).
median() { printf '%s\n' "$@" | sort -g | sed -n "$((($# + 1) / 2))p"; }

# udp_rcvbuf_errors: the kernel's count of UDP datagrams dropped because a
# socket's receive buffer was full.
udp_rcvbuf_errors() {
  awk '/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) if ($i == "RcvbufErrors") c = i; h = 1 } else print $c }' /proc/net/snmp
}

kv() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }

# --- configurations ------------------------------------------------------

# write_zone FILE N: the upstream zone $ZONE with names n0..n(N-1), each one A.
write_zone() {
  {
    printf '$ORIGIN %s\n$TTL 3600\n' "$ZONE"
    printf '@ IN SOA ns hostmaster 1 7200 1800 86400 3600\n@ IN NS ns\nns IN A 127.0.0.1\n'
    awk -v n="$2" 'BEGIN { for (i = 0; i < n; i++)
      printf "n%d IN A 10.%d.%d.%d\n", i, int(i / 65536) % 256, int(i / 256) % 256, i % 256 }'
  } >"$1"
}

write_nsd_conf() { # DIR PORT ZONEFILE
  cat >"$1/nsd.conf" <<EOF
server:
  ip-address: 127.0.0.1@$2
  do-ip6: no
  username: ""
  chroot: ""
  zonesdir: "$1"
  database: ""
  zonelistfile: "$1/zone.list"
  xfrdfile: "$1/xfrd.state"
  xfrdir: "$1"
  pidfile: "$1/nsd.pid"
  server-count: 1
  verbosity: 1
  rrl-ratelimit: 0
  rrl-whitelist-ratelimit: 0
  hide-version: yes
remote-control:
  control-enable: no
zone:
  name: $ZONE
  zonefile: "$3"
EOF
}

# The node-cache style Corefile for the forwarding rows: cache + forward.
# The cache holds every name of the run (CoreDNS sizes by entries, not
# bytes) and keeps answers up to the zone's TTL, like nodecache.
write_corefile_forward() { # FILE PORT UPPORT METRICSPORT
  cat >"$1" <<EOF
.:$2 {
    bind 127.0.0.1
    errors
    cache 3600 {
        success 400000
        denial 10000
    }
    forward . 127.0.0.1:$3 {
        max_concurrent 1000
    }
    prometheus 127.0.0.1:$4
}
EOF
}

# The stock cluster Corefile (kubeadm's, without health/ready/reload/loop)
# against the bench API server; EXTRA is one more directive ("cache 30",
# "pprof ADDR") or empty.
write_corefile_zone() { # FILE PORT UPPORT METRICSPORT KUBECONFIG EXTRA
  cat >"$1" <<EOF
.:$2 {
    bind 127.0.0.1
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $5 bench
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    prometheus 127.0.0.1:$4
    forward . 127.0.0.1:$3
    $6
}
EOF
}

write_unbound_conf() { # FILE DIR PORT UPPORT
  cat >"$1" <<EOF
server:
  interface: 127.0.0.1@$3
  port: $3
  do-ip6: no
  username: ""
  chroot: ""
  directory: "$2"
  pidfile: "$2/unbound.pid"
  use-syslog: no
  logfile: ""
  verbosity: 0
  num-threads: 1
  msg-cache-size: $CACHE_SIZE_UNBOUND
  rrset-cache-size: $CACHE_SIZE_UNBOUND
  num-queries-per-thread: 4096
  outgoing-range: 8192
  do-not-query-localhost: no
  access-control: 127.0.0.0/8 allow
  module-config: "iterator"
  qname-minimisation: no
  prefetch: no
  cache-max-ttl: 3600
remote-control:
  control-enable: no
forward-zone:
  name: "."
  forward-addr: 127.0.0.1@$4
EOF
}
