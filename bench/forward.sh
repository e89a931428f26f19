# shellcheck shell=bash
# The forwarding rows of bench/run.sh (cache hit, miss, RSS) for nodecache,
# CoreDNS (cache + forward) and Unbound, all in front of the same NSD.
# Sourced by run.sh.

# measure_forward NAME PID PORT: the forwarding rows for one server, which
# has answered its first query and nothing more.
measure_forward() {
  local s=$1 pid=$2 port=$3 idle warm
  idle=$(rss_kib "$pid")
  log "== $s: warming $WARM names"
  dnsperf_run "$pid" "$port" "$WORK/warm.txt" -n 1 -l 120 -q 50
  warm=$(rss_kib "$pid")
  R[pss|$s]=$(awk -v k="$(pss_kib "$pid")" 'BEGIN { printf "%.0f", k / 1024 }')
  R[rssidle|$s]=$(awk -v k="$idle" 'BEGIN { printf "%.0f", k / 1024 }')
  R[rss|$s]=$(awk -v k="$warm" 'BEGIN { printf "%.0f", k / 1024 }')
  R[rssname|$s]=$(awk -v w="$warm" -v i="$idle" -v n="$WARM" 'BEGIN { printf "%.2f", (w - i) / n }')
  log "$s: RSS $idle KiB idle, $warm KiB with $WARM names cached"
  dnsperf_median "$pid" "$port" "$WORK/hit.txt" -l "$PHASE"
  R[hitqps|$s]=$QPS; R[hitcpu|$s]=$CPU_US; R[hitruns|$s]=$RUNS
  dnsperf_median "$pid" "$port" "$WORK/hit.txt" -l "$PHASE" -q 100
  R[hit100qps|$s]=$QPS; R[hit100cpu|$s]=$CPU_US; R[hit100runs|$s]=$RUNS
  latency_median "$pid" "$port" "$WORK/hit.txt" "$HIT_RATE"
  R[hitp50|$s]=$P50; R[hitp99|$s]=$P99; R[hitp999|$s]=$P999; R[hitlcpu|$s]=$LCPU_US; R[hitlost|$s]=$LOST_PCT
  R[hitp99runs|$s]=$P99RUNS
  # each run its own never-asked names: miss.0.txt, miss.1.txt, ...
  dnsperf_median "$pid" "$port" "$WORK/miss.%i.txt" -n 1 -l "$PHASE" -q 100
  R[missqps|$s]=$QPS; R[misscpu|$s]=$CPU_US; R[missruns|$s]=$RUNS
  latency_run "$pid" "$port" "$WORK/misslat.txt" "$MISS_RATE"
  R[missp50|$s]=$P50; R[missp99|$s]=$P99; R[missp999|$s]=$P999; R[misslatlost|$s]=$LOST_PCT
}

# nodecache_args PORT: the flags every nodecache of the run shares.
nodecache_args() {
  local d=$WORK/nc.$1
  mkdir -p "$d"
  echo run --local-ip 127.0.0.1 --port "$1" --setup-interface=false --setup-iptables=false \
    --cache-size "$CACHE_SIZE" --health-addr "127.0.0.1:$(free_port)" --log-level warn \
    --admin-socket "$d/admin.sock" --handover-socket "$d/handover.sock" ${BENCH_NODECACHE_FLAGS:-}
  # Only when asked: a binary of a tree before --loadbalance (NODECACHE_BIN,
  # for a before/after sitting) takes every other flag here.
  if [ "${BENCH_LOADBALANCE:-0}" = 1 ]; then echo --loadbalance=true; fi
}

# profile_path PID PORT PPROFPORT NAME FILE DNSPERF-ARGS...: a CPU profile of
# nodecache over one more dnsperf run of FILE, written with its
# `go tool pprof -top` summary and the binary to $PROFILE_DIR. Profiles go
# into the issue notes, not the repo: RESULTS.md only says where they are.
profile_path() {
  local pid=$1 port=$2 pport=$3 name=$4 file=$5 curl; shift 5
  log "== nodecache: CPU profile of the $name path under dnsperf load"
  mkdir -p "$PROFILE_DIR"
  curl -sf -o "$PROFILE_DIR/$name.pprof" "http://127.0.0.1:$pport/debug/pprof/profile?seconds=$PHASE" &
  curl=$!
  sleep 0.5
  dnsperf_run "$pid" "$port" "$file" -l "$PHASE" "$@"
  wait "$curl" || die "fetching the CPU profile (does $NODECACHE have --pprof?)"
  cp "$NODECACHE" "$PROFILE_DIR/nodecache"
  go tool pprof -top -nodecount=45 "$PROFILE_DIR/nodecache" "$PROFILE_DIR/$name.pprof" \
    >"$PROFILE_DIR/$name.top.txt" 2>/dev/null || true
  log "profile: go tool pprof $PROFILE_DIR/nodecache $PROFILE_DIR/$name.pprof"
}

# measure_floor: the cache-hit CPU of bench/floor (recvmmsg, set QR,
# sendmmsg), driven exactly as the servers' hit rows, in the same run: the
# kernel's socket work per answer, the floor no server can go below.
measure_floor() {
  local port pid
  port=$(free_port)
  start floor 0 "$FLOOR" 127.0.0.1 "$port"
  pid=$PID
  sleep 0.2
  dnsperf_median "$pid" "$port" "$WORK/hit.txt" -l "$PHASE"
  R[hitqps|floor]=$QPS; R[hitcpu|floor]=$CPU_US; R[hitruns|floor]=$RUNS
  dnsperf_median "$pid" "$port" "$WORK/hit.txt" -l "$PHASE" -q 100
  R[hit100qps|floor]=$QPS; R[hit100cpu|floor]=$CPU_US; R[hit100runs|floor]=$RUNS
  stop "$pid"
}

measure_forwarders() {
  local port mport pport pid profile=${BENCH_PROFILE:-1}
  measure_floor
  port=$(free_port); mport=$(free_port); pport=$(free_port)
  # shellcheck disable=SC2046
  start nodecache 0 "$NODECACHE" $(nodecache_args "$port") --upstream "127.0.0.1:$NSD_PORT" \
    --metrics-addr "127.0.0.1:$mport" --pprof="$([ "$profile" = 1 ] && echo true || echo false)" \
    --pprof-addr "127.0.0.1:$pport"
  pid=$PID
  wait_dns "$port" "n1.$ZONE" A NOERROR
  measure_forward nodecache "$pid" "$port"
  if [ "$profile" = 1 ]; then
    profile_path "$pid" "$port" "$pport" hit "$WORK/hit.txt"
    # never asked as AAAA: every query is a miss (NODATA from NSD)
    profile_path "$pid" "$port" "$pport" miss "$WORK/missprof.txt" -n 1 -q 100
  fi
  stop "$pid"
  if [ -n "${BENCH_VARIANT_FLAGS:-}" ]; then
    port=$(free_port)
    # shellcheck disable=SC2046,SC2086
    start nodecache-variant 0 "$NODECACHE" $(nodecache_args "$port") --upstream "127.0.0.1:$NSD_PORT" \
      --metrics-addr "127.0.0.1:$(free_port)" $BENCH_VARIANT_FLAGS
    pid=$PID
    wait_dns "$port" "n1.$ZONE" A NOERROR
    measure_forward variant "$pid" "$port"
    stop "$pid"
  fi
  if [ -n "${BENCH_BEFORE_BIN:-}" ]; then
    port=$(free_port)
    # shellcheck disable=SC2046
    start nodecache-before 0 "$BENCH_BEFORE_BIN" $(nodecache_args "$port") --upstream "127.0.0.1:$NSD_PORT" \
      --metrics-addr "127.0.0.1:$(free_port)"
    pid=$PID
    wait_dns "$port" "n1.$ZONE" A NOERROR
    measure_forward before "$pid" "$port"
    stop "$pid"
  fi

  port=$(free_port)
  write_corefile_forward "$WORK/Corefile.forward" "$port" "$NSD_PORT" "$(free_port)"
  start coredns 0 "$COREDNS" -conf "$WORK/Corefile.forward"
  pid=$PID
  wait_dns "$port" "n1.$ZONE" A NOERROR
  measure_forward coredns "$pid" "$port"
  stop "$pid"

  port=$(free_port)
  write_unbound_conf "$WORK/unbound.conf" "$WORK" "$port" "$NSD_PORT"
  start unbound 0 unbound -d -c "$WORK/unbound.conf"
  pid=$PID
  wait_dns "$port" "n1.$ZONE" A NOERROR
  measure_forward unbound "$pid" "$port"
  stop "$pid"
}
