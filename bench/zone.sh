# shellcheck shell=bash
# The cluster-zone rows of bench/run.sh: one etcd and one kube-apiserver
# (the e2e binaries, e2e/tools/build-k8s.sh) on loopback, loaded with
# a synthetic cluster of ZONE_SERVICES services; nodecache and CoreDNS's
# kubernetes plugin both watch that API server. Then the same API server is
# grown to BIGZONE_SERVICES services for the memory rows (BENCH_BIGZONE=0
# skips them). Sourced by run.sh.

ZONE_SERVICES=${ZONE_SERVICES:-1000}
ZONE_ENDPOINTS=${ZONE_ENDPOINTS:-10}
ZONE_CHURN_RATE=${ZONE_CHURN_RATE:-20}      # EndpointSlice updates a second of the churn row
BIGZONE_SERVICES=${BIGZONE_SERVICES:-10000} # the memory rows' cluster, grown from the first
BIGZONE_SETTLE=5                            # seconds between the sync and the memory readings

# start_apiserver: sets KUBECONFIG_FILE. Needs openssl and the binaries.
start_apiserver() {
  local bin dir=$WORK/k8s token etcd_port peer_port api_port i
  bin=$("$ROOT/e2e/tools/build-k8s.sh") || die "e2e/tools/build-k8s.sh failed"
  mkdir -p "$dir/certs"
  openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
  token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  echo "$token,bench-admin,bench-admin,\"system:masters\"" >"$dir/tokens.csv"
  etcd_port=$(free_port); peer_port=$(free_port); api_port=$(free_port)
  start etcd 1 "$bin/etcd" --name=bench --data-dir="$dir/etcd" \
    --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-cluster="bench=http://127.0.0.1:$peer_port" --unsafe-no-fsync --log-level=warn
  start kube-apiserver 1 "$bin/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address=127.0.0.1 --secure-port="$api_port" --advertise-address=127.0.0.1 \
    --endpoint-reconciler-type=none --cert-dir="$dir/certs" --token-auth-file="$dir/tokens.csv" \
    --authorization-mode=RBAC --service-cluster-ip-range=10.96.0.0/16 \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$dir/sa.pub" --service-account-signing-key-file="$dir/sa.key" \
    --disable-admission-plugins=ServiceAccount --profiling=false --v=0
  KUBECONFIG_FILE=$dir/kubeconfig
  cat >"$KUBECONFIG_FILE" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: bench
  cluster: {server: "https://127.0.0.1:$api_port", insecure-skip-tls-verify: true}
users:
- name: bench
  user: {token: "$token"}
contexts:
- name: bench
  context: {cluster: bench, user: bench}
current-context: bench
EOF
  for i in $(seq 300); do
    kubectl --kubeconfig "$KUBECONFIG_FILE" get --raw /readyz >/dev/null 2>&1 &&
      kubectl --kubeconfig "$KUBECONFIG_FILE" get namespace default >/dev/null 2>&1 && return 0
    sleep 0.3
  done
  die "kube-apiserver not ready after 90 s: $(tail -5 "$WORK/kube-apiserver.log")"
}

# load_cluster: the synthetic cluster into the API server.
load_cluster() {
  local t0=$SECONDS
  "$BENCHTOOL" cluster -services "$ZONE_SERVICES" -endpoints "$ZONE_ENDPOINTS" \
    -fixture "$WORK/cluster.yaml" -queries "$WORK/zone.txt" -n 100000 >/dev/null
  create_chunked "$WORK/cluster.yaml"
  log "loaded $ZONE_SERVICES services and their EndpointSlices in $((SECONDS - t0)) s"
}

# create_chunked YAML: kubectl create of a multi-document YAML stream in
# parallel chunks of 100 objects. The first chunk goes in alone, before the
# others: it holds the namespaces when the stream has any. --validate=false
# because the objects are generated (the API server still validates them):
# kubectl's schema validation made the load about seven times slower.
create_chunked() {
  local yaml=$1 dir=$1.chunks k=(kubectl --kubeconfig "$KUBECONFIG_FILE" create --validate=false)
  mkdir -p "$dir"
  awk -v d="$dir" '/^---$/ { n++; f = sprintf("%s/%05d.yaml", d, int(n / 100)) } { print > f }' "$yaml"
  "${k[@]}" -f "$dir/00000.yaml" >/dev/null || die "kubectl create -f $dir/00000.yaml failed"
  find "$dir" -name '*.yaml' ! -name 00000.yaml -print0 |
    xargs -0 -n 1 -P 4 "${k[@]}" -f >/dev/null ||
    die "kubectl create of the chunks in $dir failed"
}

# zone_rows NAME PID PORT: throughput, CPU and latency on the zone queries
# (CoreDNS's; nodecache's come from zone_churn_rounds).
zone_rows() {
  local s=$1 pid=$2 port=$3
  dnsperf_median "$pid" "$port" "$WORK/zone.txt" -l "$PHASE"
  R[zoneqps|$s]=$QPS; R[zonecpu|$s]=$CPU_US; R[zoneruns|$s]=$RUNS
  latency_run "$pid" "$port" "$WORK/zone.txt" "$HIT_RATE"
  R[zonep50|$s]=$P50; R[zonep99|$s]=$P99; R[zonep999|$s]=$P999; R[zonelost|$s]=$LOST_PCT; R[zonelcpu|$s]=$LCPU_US
  R[zonerss|$s]=$(rss_mib "$pid")
}

# zone_churn_rounds NAME PID PORT METRICSPORT: the zone rows of one
# nodecache without churn and with it, in $REPEAT rounds: round i runs the
# zone queries without churn and then with it, or the other way round
# (the order alternates), each a max-QPS run and a run at HIT_RATE, so
# that a round's two runs lie in the same minute and the ratio is taken
# within each round. With churn, benchtool slicechurn writes ZONE_CHURN_RATE
# EndpointSlice updates a second (each turns one service's first endpoint
# not ready or ready again) into the API server from 2 s before the runs;
# the updates the server applied meanwhile are its own count of watch
# events. The API server's share of CPU 1 slows dnsperf, and a server
# answering fewer queries a second batches fewer per wake-up: the
# fixed-rate figure is the one churn does not move that way. Sets the
# zone rows as zone_rows does (CPU: the run with the median CPU; latency:
# the median of the runs), the churn rows, and R[zonechurnrel|s] and
# R[zonechurnlrel|s], the median of the rounds' ratios (churn ÷ without),
# with each round's ratio in R[zonechurnrelruns|s] and R[zonechurnlrelruns|s].
zone_churn_rounds() {
  local s=$1 pid=$2 port=$3 mport=$4 i phase order
  local -a quiet=() churn=() rel=() lrel=()
  local -A q c lat
  local updates=0 secs=0 events=0
  log "== zone churn rounds: $REPEAT, each without churn and with $ZONE_CHURN_RATE EndpointSlice updates/s, back to back"
  for ((i = 0; i < REPEAT; i++)); do
    order="quiet churn"
    ((i % 2 == 0)) || order="churn quiet"
    for phase in $order; do
      if [ "$phase" = churn ]; then zone_churn_start "$s" "$mport"; fi
      dnsperf_run "$pid" "$port" "$WORK/zone.txt" -l "$PHASE"
      q[$phase]="$CPU_US $QPS"
      latency_run "$pid" "$port" "$WORK/zone.txt" "$HIT_RATE"
      c[$phase]=$LCPU_US
      if [ "$phase" = quiet ]; then
        lat[p50]+=" $P50"; lat[p99]+=" $P99"; lat[p999]+=" $P999"; lat[lost]+=" $LOST_PCT"; lat[lcpu]+=" $LCPU_US"
        R[zonerss|$s]=$(rss_mib "$pid")
      else
        lat[cp99]+=" $P99"; lat[clcpu]+=" $LCPU_US"
        zone_churn_stop "$s" "$mport"
        updates=$((updates + CHURN_UPDATES)); secs=$(awk -v a="$secs" -v b="$CHURN_SECONDS" 'BEGIN { print a + b }')
        events=$((events + CHURN_EVENTS))
      fi
    done
    quiet+=("${q[quiet]}"); churn+=("${q[churn]}")
    rel+=("$(ratio "${q[churn]%% *}" "${q[quiet]%% *}")"); lrel+=("$(ratio "${c[churn]}" "${c[quiet]}")")
    log "$s zone round $i ($order): cpu/answer at max QPS ${q[quiet]%% *} us without churn, ${q[churn]%% *} with (${rel[-1]}); at $HIT_RATE qps ${c[quiet]} and ${c[churn]} (${lrel[-1]})"
  done
  median_run "${quiet[@]}"; R[zonecpu|$s]=${MID% *}; R[zoneqps|$s]=${MID#* }; R[zoneruns|$s]=$MIDRUNS
  median_run "${churn[@]}"; R[zonechurncpu|$s]=${MID% *}; R[zonechurnruns|$s]=$MIDRUNS
  # shellcheck disable=SC2086 # the lists split on purpose
  {
    R[zonep50|$s]=$(median ${lat[p50]}); R[zonep99|$s]=$(median ${lat[p99]}); R[zonep999|$s]=$(median ${lat[p999]})
    R[zonelost|$s]=$(median ${lat[lost]}); R[zonelcpu|$s]=$(median ${lat[lcpu]})
    R[zonechurnp99|$s]=$(median ${lat[cp99]}); R[zonechurnlcpu|$s]=$(median ${lat[clcpu]})
  }
  R[zonelruns|$s]=${lat[lcpu]# }; R[zonechurnlruns|$s]=${lat[clcpu]# }
  R[zonechurnrel|$s]=$(median "${rel[@]}"); R[zonechurnrelruns|$s]=${rel[*]}
  R[zonechurnlrel|$s]=$(median "${lrel[@]}"); R[zonechurnlrelruns|$s]=${lrel[*]}
  R[zonechurnrate|$s]=$(awk -v u="$updates" -v t="$secs" 'BEGIN { if (t > 0) printf "%.1f", u / t; else print "–" }')
  R[zonechurnevents|$s]=$events
  log "$s under churn: ${R[zonechurnrate|$s]} updates/s written, $events zone events applied; churn ÷ without, per round: max QPS ${rel[*]} (median ${R[zonechurnrel|$s]}), $HIT_RATE qps ${lrel[*]} (median ${R[zonechurnlrel|$s]})"
}

# zone_churn_start NAME METRICSPORT: benchtool slicechurn on CPU 1 (sets
# CHURN_PID, CHURN_OUT, CHURN_E0), then 2 s for the churn to be under way
# before the first answer counts.
zone_churn_start() {
  CHURN_OUT=$WORK/slicechurn.$1.$(date +%s%N).txt
  CHURN_E0=$(zone_events "$2")
  taskset -c 1 "${PRIO[@]}" "$BENCHTOOL" slicechurn -kubeconfig "$KUBECONFIG_FILE" -services "$ZONE_SERVICES" \
    -endpoints "$ZONE_ENDPOINTS" -rate "$ZONE_CHURN_RATE" -duration $((2 * PHASE + 60))s >"$CHURN_OUT" 2>&1 &
  CHURN_PID=$!
  PIDS+=("$CHURN_PID") # stopped on exit should the run die first
  sleep 2
}

# zone_churn_stop NAME METRICSPORT: the zone's events since zone_churn_start
# (read before slicechurn writes the touched slices back), then stops
# slicechurn and waits until the zone has applied those write-backs too (its
# event count still for 0.5 s, at most 10 s), so that the next run without
# churn has none. Sets CHURN_UPDATES, CHURN_SECONDS (slicechurn's own) and
# CHURN_EVENTS.
zone_churn_stop() {
  local e1 a b k out
  e1=$(zone_events "$2")
  kill -TERM "$CHURN_PID"
  wait "$CHURN_PID" || die "benchtool slicechurn failed: $(tail -3 "$CHURN_OUT")"
  out=$(cat "$CHURN_OUT")
  CHURN_UPDATES=$(kv updates "$out"); CHURN_SECONDS=$(kv seconds "$out")
  CHURN_EVENTS=$(awk -v a="$CHURN_E0" -v b="$e1" 'BEGIN { printf "%.0f", b - a }')
  log "$1: slicechurn $out; zone events applied $CHURN_EVENTS"
  b=$(zone_events "$2")
  for ((k = 0; k < 20; k++)); do
    sleep 0.5
    a=$b; b=$(zone_events "$2")
    [ "$a" != "$b" ] || return 0
  done
  log "$1: the zone still applied events 10 s after slicechurn ended"
}

# zone_events METRICSPORT: the EndpointSlice and other watch events the
# zone has applied since the sync (nodecache_zone_programming_duration_seconds_count{from="event"}).
zone_events() {
  curl -sf "http://127.0.0.1:$1/metrics" |
    awk '/^nodecache_zone_programming_duration_seconds_count\{from="event"\}/ { print $2; found = 1 } END { exit !found }' ||
    die "no nodecache_zone_programming_duration_seconds_count on 127.0.0.1:$1/metrics"
}

# zone_start NAME PORT SERVICES CMD...: starts CMD on CPU 0 and waits until
# the last of SERVICES services answers (every service loaded and synced);
# sets PID.
zone_start() {
  local name=$1 port=$2 last=$(($3 - 1)); shift 3
  start "$name" 0 "$@"
  wait_dns "$port" "svc-$last.ns-$((last % 10)).svc.cluster.local" A NOERROR 120
}

measure_zone() {
  local port mport
  if ! command -v openssl >/dev/null || ! command -v kubectl >/dev/null; then
    log "zone rows skipped: openssl and kubectl are needed"; return 0
  fi
  log "== cluster zone: API server with $ZONE_SERVICES services x $ZONE_ENDPOINTS endpoints"
  start_apiserver
  load_cluster

  port=$(free_port); mport=$(free_port)
  # shellcheck disable=SC2046
  zone_start nodecache-zone "$port" "$ZONE_SERVICES" "$NODECACHE" $(nodecache_args "$port") --upstream "127.0.0.1:$NSD_PORT" \
    --metrics-addr "127.0.0.1:$mport" --kubeconfig "$KUBECONFIG_FILE"
  zone_churn_rounds nodecache "$PID" "$port" "$mport"
  stop "$PID"

  port=$(free_port)
  write_corefile_zone "$WORK/Corefile.zone" "$port" "$NSD_PORT" "$(free_port)" "$KUBECONFIG_FILE" "cache 30"
  zone_start coredns-zone "$port" "$ZONE_SERVICES" "$COREDNS" -conf "$WORK/Corefile.zone"
  zone_rows coredns "$PID" "$port"
  stop "$PID"

  port=$(free_port)
  write_corefile_zone "$WORK/Corefile.zone-nocache" "$port" "$NSD_PORT" "$(free_port)" "$KUBECONFIG_FILE" ""
  zone_start coredns-zone-nocache "$port" "$ZONE_SERVICES" "$COREDNS" -conf "$WORK/Corefile.zone-nocache"
  dnsperf_median "$PID" "$port" "$WORK/zone.txt" -l "$PHASE"
  R[zoneqpsnc|coredns]=$QPS; R[zonecpunc|coredns]=$CPU_US; R[zonerunsnc|coredns]=$RUNS
  stop "$PID"

  if [ "${BENCH_BIGZONE:-1}" = 1 ]; then
    measure_bigzone
  fi
  R[zonemem|nodecache]=$(taskset -c 0 "$BENCHTOOL" zonemem -services "$BIGZONE_SERVICES" -endpoints "$ZONE_ENDPOINTS" |
    tr ' ' '\n' | sed -n 's/^heap_mib=//p')
}

# measure_bigzone: grows the API server's cluster to BIGZONE_SERVICES
# services and starts nodecache, then CoreDNS's kubernetes plugin alone, on
# it; their memory once synced is in zone_memory.
measure_bigzone() {
  local port mport pport t0=$SECONDS
  if [ "$BIGZONE_SERVICES" -gt "$ZONE_SERVICES" ]; then
    log "== big cluster zone: growing the API server to $BIGZONE_SERVICES services x $ZONE_ENDPOINTS endpoints"
    "$BENCHTOOL" cluster -services "$BIGZONE_SERVICES" -endpoints "$ZONE_ENDPOINTS" -from "$ZONE_SERVICES" \
      -fixture "$WORK/bigcluster.yaml" >/dev/null
    create_chunked "$WORK/bigcluster.yaml"
    log "loaded services $ZONE_SERVICES to $((BIGZONE_SERVICES - 1)) and their EndpointSlices in $((SECONDS - t0)) s"
  fi

  port=$(free_port); mport=$(free_port); pport=$(free_port)
  # shellcheck disable=SC2046
  zone_start nodecache-bigzone "$port" "$BIGZONE_SERVICES" "$NODECACHE" $(nodecache_args "$port") \
    --upstream "127.0.0.1:$NSD_PORT" --metrics-addr "127.0.0.1:$mport" --pprof --pprof-addr "127.0.0.1:$pport" \
    --kubeconfig "$KUBECONFIG_FILE"
  zone_memory nodecache "$PID" "$mport" "$pport"
  stop "$PID"

  port=$(free_port); mport=$(free_port); pport=$(free_port)
  write_corefile_zone "$WORK/Corefile.bigzone" "$port" "$NSD_PORT" "$mport" "$KUBECONFIG_FILE" "pprof 127.0.0.1:$pport"
  zone_start coredns-bigzone "$port" "$BIGZONE_SERVICES" "$COREDNS" -conf "$WORK/Corefile.bigzone"
  zone_memory coredns "$PID" "$mport" "$pport"
  stop "$PID"
}

# zone_memory NAME PID METRICSPORT PPROFPORT: BIGZONE_SETTLE seconds after
# the sync, the server's RSS and Go heap in use (its own /metrics), then
# its live heap: go_memstats_heap_alloc_bytes just after
# /debug/pprof/heap?gc=1 ran a full collection.
zone_memory() {
  local s=$1 pid=$2 mport=$3 pport=$4
  sleep "$BIGZONE_SETTLE"
  R[bigrss|$s]=$(rss_mib "$pid")
  R[bigheap|$s]=$(metric_mib "$mport" go_memstats_heap_inuse_bytes)
  curl -sf -o /dev/null "http://127.0.0.1:$pport/debug/pprof/heap?gc=1" ||
    die "forcing a GC of $s through 127.0.0.1:$pport/debug/pprof/heap?gc=1"
  R[biglive|$s]=$(metric_mib "$mport" go_memstats_heap_alloc_bytes)
  log "$s with $BIGZONE_SERVICES services: RSS ${R[bigrss|$s]} MiB, heap in use ${R[bigheap|$s]} MiB, live heap after GC ${R[biglive|$s]} MiB"
}
