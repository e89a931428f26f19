# shellcheck shell=bash
# The cluster-zone rows of bench/run.sh: one etcd and one kube-apiserver
# (the e2e binaries, e2e/tools/build-apiserver.sh) on loopback, loaded with
# a synthetic cluster of ZONE_SERVICES services; nodecache and CoreDNS's
# kubernetes plugin both watch that API server. Sourced by run.sh.

ZONE_SERVICES=${ZONE_SERVICES:-1000}
ZONE_ENDPOINTS=${ZONE_ENDPOINTS:-10}

# start_apiserver: sets KUBECONFIG_FILE. Needs openssl and the binaries.
start_apiserver() {
  local bin dir=$WORK/k8s token etcd_port peer_port api_port i
  bin=$("$ROOT/e2e/tools/build-apiserver.sh") || die "e2e/tools/build-apiserver.sh failed"
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

# load_cluster: the synthetic cluster into the API server, in parallel
# chunks of 100 objects.
load_cluster() {
  local t0=$SECONDS
  "$BENCHTOOL" cluster -services "$ZONE_SERVICES" -endpoints "$ZONE_ENDPOINTS" \
    -fixture "$WORK/cluster.yaml" -queries "$WORK/zone.txt" -n 100000 >/dev/null
  # namespaces first, then the rest split on document boundaries
  awk -v d="$WORK/chunks" 'BEGIN { system("mkdir -p " d) }
    /^---$/ { n++; f = sprintf("%s/%05d.yaml", d, int(n / 100)) } { print > f }' "$WORK/cluster.yaml"
  kubectl --kubeconfig "$KUBECONFIG_FILE" create -f "$WORK/chunks/00000.yaml" >/dev/null
  find "$WORK/chunks" -name '*.yaml' ! -name 00000.yaml -print0 |
    xargs -0 -n 1 -P 4 kubectl --kubeconfig "$KUBECONFIG_FILE" create -f >/dev/null
  log "loaded $ZONE_SERVICES services and their EndpointSlices in $((SECONDS - t0)) s"
}

# zone_rows NAME PID PORT: throughput, CPU and latency on the zone queries.
zone_rows() {
  local s=$1 pid=$2 port=$3
  dnsperf_run "$pid" "$port" "$WORK/zone.txt" -l "$PHASE"
  R[zoneqps|$s]=$QPS; R[zonecpu|$s]=$CPU_US
  latency_run "$pid" "$port" "$WORK/zone.txt" "$HIT_RATE"
  R[zonep50|$s]=$P50; R[zonep99|$s]=$P99; R[zonep999|$s]=$P999; R[zonelost|$s]=$LOST_PCT
  R[zonerss|$s]=$(rss_mib "$pid")
}

# zone_start NAME PORT CMD...: starts CMD on CPU 0 and waits until the last
# service answers (every service loaded and synced); sets PID.
zone_start() {
  local name=$1 port=$2; shift 2
  start "$name" 0 "$@"
  wait_dns "$port" "svc-$((ZONE_SERVICES - 1)).ns-$(((ZONE_SERVICES - 1) % 10)).svc.cluster.local" A NOERROR 120
}

measure_zone() {
  local port
  if ! command -v openssl >/dev/null || ! command -v kubectl >/dev/null; then
    log "zone rows skipped: openssl and kubectl are needed"; return 0
  fi
  log "== cluster zone: API server with $ZONE_SERVICES services x $ZONE_ENDPOINTS endpoints"
  start_apiserver
  load_cluster

  port=$(free_port)
  # shellcheck disable=SC2046
  zone_start nodecache-zone "$port" "$NODECACHE" $(nodecache_args "$port") --upstream "127.0.0.1:$NSD_PORT" \
    --metrics-addr "127.0.0.1:$(free_port)" --kubeconfig "$KUBECONFIG_FILE"
  zone_rows nodecache "$PID" "$port"
  stop "$PID"

  port=$(free_port)
  write_corefile_zone "$WORK/Corefile.zone" "$port" "$NSD_PORT" "$(free_port)" "$KUBECONFIG_FILE" "cache 30"
  zone_start coredns-zone "$port" "$COREDNS" -conf "$WORK/Corefile.zone"
  zone_rows coredns "$PID" "$port"
  stop "$PID"

  port=$(free_port)
  write_corefile_zone "$WORK/Corefile.zone-nocache" "$port" "$NSD_PORT" "$(free_port)" "$KUBECONFIG_FILE" ""
  zone_start coredns-zone-nocache "$port" "$COREDNS" -conf "$WORK/Corefile.zone-nocache"
  dnsperf_run "$PID" "$port" "$WORK/zone.txt" -l "$PHASE"
  R[zoneqpsnc|coredns]=$QPS; R[zonecpunc|coredns]=$CPU_US
  stop "$PID"

  R[zonemem|nodecache]=$(taskset -c 0 "$BENCHTOOL" zonemem -services 10000 -endpoints 10 | tr ' ' '\n' |
    sed -n 's/^heap_mib=//p')
}
