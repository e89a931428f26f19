# shellcheck shell=bash
# The forwarding rows of bench/run.sh (cache hit, miss, RSS) for nodecache,
# CoreDNS (cache + forward) and Unbound, all in front of the same NSD.
# Sourced by run.sh.

# The servers measure_forward measured, in that order, with their PID and
# port: they stay up for the interleaved rounds (measure_rounds).
MISS_SERVERS=()
declare -A SRV_PID SRV_PORT

# measure_forward NAME PID PORT: the forwarding rows for one server, which
# has answered its first query and nothing more: RSS and the miss latency.
# The cache-hit rows and the max-QPS miss row are taken later for every
# server at once, in rounds (measure_rounds).
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
  latency_run "$pid" "$port" "$WORK/misslat.txt" "$MISS_RATE"
  R[missp50|$s]=$P50; R[missp99|$s]=$P99; R[missp999|$s]=$P999; R[misslatlost|$s]=$LOST_PCT
  MISS_SERVERS+=("$s"); SRV_PID[$s]=$pid; SRV_PORT[$s]=$port
}

# rounds KEY REF SERVERS FILE DNSPERF-ARGS...: max-QPS runs of the servers
# named in SERVERS (a space-separated list of SRV_PID keys), interleaved.
# Round i loads each server in turn, the order rotating every round, with
# FILE (%i: the round's number), so that every server's run i lies in the
# same minute as the others' run i. One run on this shared VM moves by
# ±25 % while the server does the same work (the same system calls per
# answer): the machine's pace drifts over minutes with what else runs on
# it, and with one server after another a slow minute lands on one
# server's runs and not the other's (bench/README.md). Sets R[KEYqps|s] and
# R[KEYcpu|s] (the run with the median CPU), R[KEYruns|s] (each round's CPU
# per answer, in round order) and R[KEYrel|s] (the median of the rounds'
# ratios to REF's run of the same round, when REF ran).
rounds() {
  local key=$1 ref=$2 i k s file=$4
  local -a srv
  read -r -a srv <<<"$3"
  shift 4
  local n=${#srv[@]}
  local -A run
  log "== $key rounds: $REPEAT, each server in turn (${srv[*]})"
  for ((i = 0; i < REPEAT; i++)); do
    for ((k = 0; k < n; k++)); do
      s=${srv[$(((k + i) % n))]}
      dnsperf_run "${SRV_PID[$s]}" "${SRV_PORT[$s]}" "${file//%i/$i}" "$@"
      run[$s|$i]="$CPU_US $QPS"
    done
  done
  for s in "${srv[@]}"; do
    local rows=() mid
    for ((i = 0; i < REPEAT; i++)); do rows+=("${run[$s|$i]}"); done
    mid=$(printf '%s\n' "${rows[@]}" | sort -g | sed -n "$(((REPEAT + 1) / 2))p")
    R[${key}cpu|$s]=${mid% *}; R[${key}qps|$s]=${mid#* }
    R[${key}runs|$s]=$(printf '%s\n' "${rows[@]}" | awk '{ printf "%s%s", sep, $1; sep = " " }')
    if [ -n "${run[$ref|0]:-}" ]; then
      R[${key}rel|$s]=$(for ((i = 0; i < REPEAT; i++)); do
        echo "${run[$s|$i]%% *} ${run[$ref|$i]%% *}"
      done | awk '$2 > 0 { print $1 / $2 }' | sort -g |
        awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", v[int((NR + 1) / 2)] }')
    fi
  done
}

# latency_rounds: the cache-hit latency at $HIT_RATE qps of every forwarder
# and the floor server (what the kernel and the client alone give), in
# $LAT_REPEAT rounds interleaved as rounds does; each percentile the median
# of the server's runs, every run's p99 kept (R[hitp99runs|s], in round
# order), R[hitp99rel|s] the median of the rounds' ratios of the
# server's p99 to Unbound's run of the same round, and R[hitp99below|s] the
# rounds in which it was below Unbound's. One run's p99 moves by
# ±15 % between runs minutes apart on a quiet machine and by 10× on a busy
# one, alike for every server (bench/RESULTS.md, the hit p99 study): three
# rounds left "≤ Unbound's" a coin flip.
latency_rounds() {
  local i k s srv=(floor "${MISS_SERVERS[@]}")
  local n=${#srv[@]}
  local -A p50 p99 p999 lost lcpu run
  log "== hit latency rounds: $LAT_REPEAT at $HIT_RATE qps, each server in turn (${srv[*]})"
  for ((i = 0; i < LAT_REPEAT; i++)); do
    for ((k = 0; k < n; k++)); do
      s=${srv[$(((k + i) % n))]}
      latency_run "${SRV_PID[$s]}" "${SRV_PORT[$s]}" "$WORK/hit.txt" "$HIT_RATE"
      p50[$s]+=" $P50"; p99[$s]+=" $P99"; p999[$s]+=" $P999"; lost[$s]+=" $LOST_PCT"; lcpu[$s]+=" $LCPU_US"
      run[$s|$i]=$P99
    done
  done
  for s in "${srv[@]}"; do
    # shellcheck disable=SC2086 # the lists split on purpose
    {
      R[hitp50|$s]=$(median ${p50[$s]}); R[hitp99|$s]=$(median ${p99[$s]}); R[hitp999|$s]=$(median ${p999[$s]})
      R[hitlost|$s]=$(median ${lost[$s]}); R[hitlcpu|$s]=$(median ${lcpu[$s]})
    }
    R[hitp99runs|$s]=${p99[$s]# }
    [ -n "${run[unbound|0]:-}" ] || continue
    R[hitp99rel|$s]=$(for ((i = 0; i < LAT_REPEAT; i++)); do echo "${run[$s|$i]} ${run[unbound|$i]}"; done |
      awk '$2 > 0 { print $1 / $2 }' | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", v[int((NR + 1) / 2)] }')
    R[hitp99below|$s]=$(for ((i = 0; i < LAT_REPEAT; i++)); do echo "${run[$s|$i]} ${run[unbound|$i]}"; done |
      awk '$1 < $2 { n++ } END { print n + 0 }')
  done
}

# measure_rounds: every interleaved row, once measure_forward has warmed
# every forwarder: the cache hit at 500 and at 100 outstanding with the
# floor server in the rounds (the ratio to it is per round), the hit
# latency, and the max-QPS miss on never-asked names miss.i.txt (each
# server its own cache; the ratio to CoreDNS's run of the same round).
measure_rounds() {
  rounds hit floor "floor ${MISS_SERVERS[*]}" "$WORK/hit.txt" -l "$PHASE"
  rounds hit100 floor "floor ${MISS_SERVERS[*]}" "$WORK/hit.txt" -l "$PHASE" -q 100
  latency_rounds
  rounds miss coredns "${MISS_SERVERS[*]}" "$WORK/miss.%i.txt" -n 1 -l "$PHASE" -q 100
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

# start_floor: bench/floor (recvmmsg, set QR, sendmmsg), started and kept
# for the hit rounds, where it is driven exactly as the servers: its CPU
# per answer is the kernel's socket work, the floor no server can go below.
start_floor() {
  local port
  port=$(free_port)
  start floor 0 "$FLOOR" 127.0.0.1 "$port"
  SRV_PID[floor]=$PID; SRV_PORT[floor]=$port
  sleep 0.2
}

# measure_forwarders: the floor started, then each forwarder's own rows in
# turn (every one stays up once measured), then the interleaved rounds of
# them all, nodecache's profiles, and every server stopped.
measure_forwarders() {
  local port mport pport pid ncpid ncport s profile=${BENCH_PROFILE:-1}
  start_floor
  port=$(free_port); mport=$(free_port); pport=$(free_port)
  # shellcheck disable=SC2046
  start nodecache 0 "$NODECACHE" $(nodecache_args "$port") --upstream "127.0.0.1:$NSD_PORT" \
    --metrics-addr "127.0.0.1:$mport" --pprof="$([ "$profile" = 1 ] && echo true || echo false)" \
    --pprof-addr "127.0.0.1:$pport"
  pid=$PID; ncpid=$PID; ncport=$port
  wait_dns "$port" "n1.$ZONE" A NOERROR
  measure_forward nodecache "$pid" "$port"
  if [ -n "${BENCH_VARIANT_FLAGS:-}" ]; then
    port=$(free_port)
    # shellcheck disable=SC2046,SC2086
    # A copy of the binary: its file pages are then its own, not shared with
    # the default nodecache still up (which would split them between the two
    # and make the variant's PSS look smaller than it is); and of the
    # supervisor's binary beside it, which `nodecache run` execs from there.
    mkdir -p "$WORK/variant"
    cp "$NODECACHE" "$WORK/variant/nodecache"
    if [ -x "$(dirname "$NODECACHE")/nodecache-supervisor" ]; then
      cp "$(dirname "$NODECACHE")/nodecache-supervisor" "$WORK/variant/"
    fi
    start nodecache-variant 0 "$WORK/variant/nodecache" $(nodecache_args "$port") --upstream "127.0.0.1:$NSD_PORT" \
      --metrics-addr "127.0.0.1:$(free_port)" $BENCH_VARIANT_FLAGS
    pid=$PID
    wait_dns "$port" "n1.$ZONE" A NOERROR
    measure_forward variant "$pid" "$port"
  fi
  if [ -n "${BENCH_BEFORE_BIN:-}" ]; then
    port=$(free_port)
    # shellcheck disable=SC2046
    start nodecache-before 0 "$BENCH_BEFORE_BIN" $(nodecache_args "$port") --upstream "127.0.0.1:$NSD_PORT" \
      --metrics-addr "127.0.0.1:$(free_port)"
    pid=$PID
    wait_dns "$port" "n1.$ZONE" A NOERROR
    measure_forward before "$pid" "$port"
  fi

  port=$(free_port)
  write_corefile_forward "$WORK/Corefile.forward" "$port" "$NSD_PORT" "$(free_port)"
  start coredns 0 "$COREDNS" -conf "$WORK/Corefile.forward"
  pid=$PID
  wait_dns "$port" "n1.$ZONE" A NOERROR
  measure_forward coredns "$pid" "$port"

  port=$(free_port)
  write_unbound_conf "$WORK/unbound.conf" "$WORK" "$port" "$NSD_PORT"
  start unbound 0 unbound -d -c "$WORK/unbound.conf"
  pid=$PID
  wait_dns "$port" "n1.$ZONE" A NOERROR
  measure_forward unbound "$pid" "$port"

  measure_rounds
  if [ "$profile" = 1 ]; then
    profile_path "$ncpid" "$ncport" "$pport" hit "$WORK/hit.txt"
    # never asked as AAAA: every query is a miss (NODATA from NSD)
    profile_path "$ncpid" "$ncport" "$pport" miss "$WORK/missprof.txt" -n 1 -q 100
  fi
  for s in floor "${MISS_SERVERS[@]}"; do stop "${SRV_PID[$s]}"; done
}
