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

# zone_rows NAME PID PORT: throughput, CPU and latency on the zone queries.
zone_rows() {
  local s=$1 pid=$2 port=$3
  dnsperf_median "$pid" "$port" "$WORK/zone.txt" -l "$PHASE"
  R[zoneqps|$s]=$QPS; R[zonecpu|$s]=$CPU_US; R[zoneruns|$s]=$RUNS
  latency_run "$pid" "$port" "$WORK/zone.txt" "$HIT_RATE"
  R[zonep50|$s]=$P50; R[zonep99|$s]=$P99; R[zonep999|$s]=$P999; R[zonelost|$s]=$LOST_PCT; R[zonelcpu|$s]=$LCPU_US
  R[zonerss|$s]=$(rss_mib "$pid")
}

# zone_churn_rows NAME PID PORT METRICSPORT: the zone queries again, as
# in zone_rows, while benchtool slicechurn writes ZONE_CHURN_RATE
# EndpointSlice updates a second (each turns one service's first endpoint
# not ready or ready again) into the API server; CPU per answer at max QPS
# and at HIT_RATE, and the updates the server applied meanwhile (its own
# count of watch events). The API server's share of CPU 1 slows dnsperf,
# and a server answering fewer queries a second batches fewer per wake-up:
# the fixed-rate figure is the one churn does not move that way.
zone_churn_rows() {
  local s=$1 pid=$2 port=$3 mport=$4 cpid out=$WORK/slicechurn.$1.txt e0 e1
  e0=$(zone_events "$mport")
  taskset -c 1 "${PRIO[@]}" "$BENCHTOOL" slicechurn -kubeconfig "$KUBECONFIG_FILE" -services "$ZONE_SERVICES" \
    -endpoints "$ZONE_ENDPOINTS" -rate "$ZONE_CHURN_RATE" -duration $(((REPEAT + 1) * (PHASE + 10) + 60))s >"$out" 2>&1 &
  cpid=$!
  sleep 2 # the churn under way before the first answer counts
  dnsperf_median "$pid" "$port" "$WORK/zone.txt" -l "$PHASE"
  R[zonechurncpu|$s]=$CPU_US; R[zonechurnruns|$s]=$RUNS
  latency_run "$pid" "$port" "$WORK/zone.txt" "$HIT_RATE"
  R[zonechurnlcpu|$s]=$LCPU_US; R[zonechurnp99|$s]=$P99
  e1=$(zone_events "$mport") # before slicechurn writes the touched slices back
  kill -TERM "$cpid"
  wait "$cpid" || die "benchtool slicechurn failed: $(tail -3 "$out")"
  R[zonechurnrate|$s]=$(kv rate "$(cat "$out")")
  R[zonechurnevents|$s]=$(awk -v a="$e0" -v b="$e1" 'BEGIN { printf "%.0f", b - a }')
  log "$s under churn: $(cat "$out"); zone events applied ${R[zonechurnevents|$s]}; cpu/answer ${R[zonechurncpu|$s]} us at max QPS (without churn ${R[zonecpu|$s]}), $LCPU_US us at $HIT_RATE qps (without ${R[zonelcpu|$s]})"
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
  zone_rows nodecache "$PID" "$port"
  zone_churn_rows nodecache "$PID" "$port" "$mport"
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
