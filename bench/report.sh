# shellcheck shell=bash
# The table of bench/run.sh, as Markdown (it is also bench/RESULTS.md).
# Reads R[row|server] filled by run.sh and zone.sh. Sourced by run.sh.

# row KEY LABEL: one table line over the three servers.
row() {
  local nc=${R[$1|nodecache]:-–} cd=${R[$1|coredns]:-–} ub=${R[$1|unbound]:-–}
  printf '| %s | %s | %s | %s | %s |\n' "$2" "$nc" "$cd" "$ub" "$(ratio "$nc" "$cd")"
}

# floor_row P LABEL: each server's ${P}cpu ÷ the floor server's run of the
# same round, the median of the rounds (R[${P}rel|s], set by rounds), when
# the floor ran; the floor's median and runs go in the label.
floor_row() {
  local p=$1 f=${R[$1cpu|floor]:-} s
  [ -n "$f" ] || return 0
  for s in nodecache coredns unbound; do
    R[${p}floor|$s]=${R[${p}rel|$s]:-–}
  done
  row "${p}floor" "$2 (floor $f µs, runs ${R[${p}runs|floor]})"
}

# HIT_PROFILE_LINES: how much of the hit path's pprof top goes into RESULTS.md.
HIT_PROFILE_LINES=35

# compare_table COL HEADER INTRO: nodecache as run beside the server
# measured as COL (variant: BENCH_VARIANT_FLAGS; before: BENCH_BEFORE_BIN)
# right after it in the same sitting (the forwarding rows).
compare_table() {
  local k col=$1 head=$2
  printf '\n%s\n\n' "$3"
  printf '| | nodecache | %s | %s ÷ nodecache |\n|---|---:|---:|---:|\n' "$head" "$head"
  local rows=("hitqps|cache hit: QPS (max)" "hitcpu|cache hit: CPU µs/answer at max QPS"
    "hit100cpu|cache hit: CPU µs/answer at max QPS, 4 clients × 100 outstanding"
    "hitlcpu|cache hit: CPU µs/answer at $HIT_RATE qps" "hitp50|cache hit: p50 µs at $HIT_RATE qps"
    "hitp99|cache hit: p99 µs at $HIT_RATE qps" "hitp99rel|cache hit: p99 ÷ Unbound's, same round (median)"
    "hitp999|cache hit: p99.9 µs at $HIT_RATE qps"
    "missqps|miss: QPS (max)" "misscpu|miss: CPU µs/answer" "missrel|miss: CPU ÷ CoreDNS's, same round (median)" "missp50|miss: p50 µs at $MISS_RATE qps"
    "missp99|miss: p99 µs at $MISS_RATE qps" "rssidle|RSS MiB idle" "rss|RSS MiB after warming $WARM names"
    "rssname|RSS KiB per cached name" "pss|PSS MiB after warming (pages the processes share count once)")
  for k in "${rows[@]}"; do
    printf '| %s | %s | %s | %s |\n' "${k#*|}" "${R[${k%%|*}|nodecache]:-–}" "${R[${k%%|*}|$col]:-–}" \
      "$(ratio "${R[${k%%|*}|$col]:-}" "${R[${k%%|*}|nodecache]:-}")"
  done
  printf '\nCPU µs/answer of each run: cache hit at 500 outstanding: nodecache %s, %s %s; at 100: nodecache %s, %s %s; miss: nodecache %s, %s %s.\n' \
    "${R[hitruns|nodecache]:-–}" "$head" "${R[hitruns|$col]:-–}" "${R[hit100runs|nodecache]:-–}" "$head" \
    "${R[hit100runs|$col]:-–}" "${R[missruns|nodecache]:-–}" "$head" "${R[missruns|$col]:-–}"
}

report() {
  local PRIO_TEXT="not niced: the run was not root"
  [ ${#PRIO[@]} -eq 0 ] || PRIO_TEXT="\`${PRIO[*]}\`"
  local commit big="$BIGZONE_SERVICES svc / $((BIGZONE_SERVICES * ZONE_ENDPOINTS)) endpoints"
  commit=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
  cat <<EOF
# nodecache benchmark results

- date: $(date -u +%Y-%m-%dT%H:%MZ)
- commit: $commit$(cd "$ROOT" && git diff --quiet HEAD -- pkg cmd 2>/dev/null || echo " (working tree differs in pkg/ or cmd/)")
- command: \`make bench\` (bench/run.sh, BENCH_PHASE_SECONDS=$PHASE, BENCH_LOADBALANCE=${BENCH_LOADBALANCE:-0}$([ -n "${BENCH_NODECACHE_FLAGS:-}" ] && printf ', BENCH_NODECACHE_FLAGS="%s"' "$BENCH_NODECACHE_FLAGS")$([ -n "${BENCH_VARIANT_FLAGS:-}" ] && printf ', BENCH_VARIANT_FLAGS="%s"' "$BENCH_VARIANT_FLAGS")$([ -n "${BENCH_BEFORE_BIN:-}" ] && printf ', BENCH_BEFORE_BIN=%s' "$(basename "$BENCH_BEFORE_BIN")"))
- machine: $(nproc) CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); $(uname -r)
- versions: nodecache $("$NODECACHE" version 2>/dev/null | head -1 || echo "?"), CoreDNS $COREDNS_VERSION,
  $(unbound -V 2>/dev/null | sed -n 's/^Version /Unbound /p'), $(nsd -v 2>&1 | head -1), $(dnsperf -h 2>&1 | sed -n 's/^Version /dnsperf /p')

Each server is measured alone, pinned to CPU 0 (\`taskset -c 0\`); dnsperf, the Go latency client, NSD (the upstream)
and the API server share CPU 1. The max-QPS cache-hit and miss runs and the cache-hit latency runs are taken in
rounds: every forwarder (and the floor server) stays up once measured, and round i loads each in turn (the order
rotating), the hit rows with the same warmed names, the miss row with the same $MISS_RUN never-asked names, so
that the servers' runs of one round lie in the same minute and a ratio is taken within each round. Same upstream (NSD, $NAMES names, TTL 3600), same cache budget
($CACHE_SIZE; CoreDNS sizes by entries: 400,000; Unbound msg and rrset caches $CACHE_SIZE_UNBOUND each).
QPS is dnsperf's (UDP, 4 clients, 500 outstanding unless a row says 100, ${PHASE} s; a miss run ends sooner
when its $MISS_RUN names are all asked); CPU µs/answer is the server's utime+stime delta over answers (the
max-QPS hit, miss and zone rows: the run with the median CPU of $REPEAT, each run's figure listed under the table); latency is an open-loop fixed-rate run of \`benchtool latency\` (${PHASE} s), from each query's send to its reply's arrival in the client's socket (the kernel's receive time): percentiles
of the answered queries (the cache-hit latency rows: each figure the median of $LAT_REPEAT runs, every run's p99 listed under the table, the floor server's in the label), the share never answered within 1 s in its own row. RSS per cached name is (RSS after
warming − RSS once the server has answered its first query) ÷ $WARM names, in KiB (1024 bytes).
EOF
  if [ -n "${R[bigrss|nodecache]:-}" ]; then
    cat <<EOF
The $big rows grow the API server of the cluster-zone rows to that size and start
each server alone on it (CoreDNS: \`kubernetes\` alone): $BIGZONE_SETTLE s after its last service answers, RSS and
\`go_memstats_heap_inuse_bytes\` from the server's own /metrics, then \`go_memstats_heap_alloc_bytes\` just after
\`/debug/pprof/heap?gc=1\` forced a full collection (nodecache \`--pprof\`, CoreDNS's \`pprof\` plugin): the live heap.
EOF
  fi
  cat <<EOF
Ratio is nodecache ÷ CoreDNS: above 1 is better for QPS, below 1 is better for the rest.

| | nodecache | CoreDNS | Unbound | nodecache/CoreDNS |
|---|---:|---:|---:|---:|
EOF
  row hitqps "cache hit: QPS (max, $HIT names warmed)"
  row hitcpu "cache hit: CPU µs/answer at max QPS"
  row hitlcpu "cache hit: CPU µs/answer at $HIT_RATE qps"
  floor_row hit "cache hit: CPU at max QPS ÷ the floor server's run of the same round, median of the rounds"
  row hit100cpu "cache hit: CPU µs/answer at max QPS, 4 clients × 100 outstanding"
  floor_row hit100 "cache hit, 100 outstanding: CPU ÷ the floor server's run of the same round, median"
  row hitp50 "cache hit: p50 µs at $HIT_RATE qps (floor ${R[hitp50|floor]:-–})"
  row hitp99 "cache hit: p99 µs at $HIT_RATE qps, median of $LAT_REPEAT rounds (floor ${R[hitp99|floor]:-–})"
  if [ -n "${R[hitp99rel|nodecache]:-}" ]; then
    printf '| %s | %s | %s | %s | %s |\n' \
      "cache hit: p99 at $HIT_RATE qps ÷ Unbound's run of the same round, median of the rounds (floor ${R[hitp99rel|floor]:-–})" \
      "${R[hitp99rel|nodecache]}" "${R[hitp99rel|coredns]:-–}" "${R[hitp99rel|unbound]:-–}" "–"
  fi
  row hitp999 "cache hit: p99.9 µs at $HIT_RATE qps (floor ${R[hitp999|floor]:-–})"
  row hitlost "cache hit: % lost at $HIT_RATE qps"
  row missqps "miss: QPS (max, unique names)"
  row misscpu "miss: CPU µs/answer"
  if [ -n "${R[missrel|nodecache]:-}" ]; then
    printf '| %s | %s | %s | %s | %s |\n' "miss: CPU ÷ CoreDNS's run of the same round, median of the rounds" \
      "${R[missrel|nodecache]}" "${R[missrel|coredns]:-–}" "${R[missrel|unbound]:-–}" "–"
  fi
  row missp50 "miss: p50 µs at $MISS_RATE qps"
  row missp99 "miss: p99 µs at $MISS_RATE qps"
  row missp999 "miss: p99.9 µs at $MISS_RATE qps"
  row misslatlost "miss: % lost at $MISS_RATE qps"
  row rssidle "RSS MiB idle (after the first answer)"
  row rss "RSS MiB after warming $WARM names"
  row rssname "RSS KiB per cached name ((warmed − idle) KiB / $WARM names)"
  if [ -n "${R[zoneqps|nodecache]:-}" ]; then
    R[zoneqpsnc|nodecache]=${R[zoneqps|nodecache]}; R[zonecpunc|nodecache]=${R[zonecpu|nodecache]}
    row zoneqps "cluster zone ($ZONE_SERVICES svc): QPS; CoreDNS kubernetes + cache 30"
    row zonecpu "cluster zone: CPU µs/answer; CoreDNS kubernetes + cache 30"
    row zoneqpsnc "cluster zone: QPS; CoreDNS kubernetes alone"
    row zonecpunc "cluster zone: CPU µs/answer; CoreDNS kubernetes alone"
    row zonep50 "cluster zone: p50 µs at $HIT_RATE qps"
    row zonep99 "cluster zone: p99 µs at $HIT_RATE qps"
    row zonep999 "cluster zone: p99.9 µs at $HIT_RATE qps"
    row zonelost "cluster zone: % lost at $HIT_RATE qps"
    row zonerss "RSS MiB with the $ZONE_SERVICES-service zone synced"
    if [ -n "${R[zonechurncpu|nodecache]:-}" ]; then
      R[zonechurnratio|nodecache]=${R[zonechurnrel|nodecache]:-–}
      R[zonechurnlratio|nodecache]=${R[zonechurnlrel|nodecache]:-–}
      row zonelcpu "cluster zone: CPU µs/answer at $HIT_RATE qps"
      row zonechurncpu "cluster zone: CPU µs/answer at max QPS while $ZONE_CHURN_RATE EndpointSlice updates/s arrive"
      row zonechurnratio "cluster zone: that ÷ without churn, at max QPS (target ≤ 1.2)"
      row zonechurnlcpu "cluster zone: CPU µs/answer at $HIT_RATE qps while $ZONE_CHURN_RATE EndpointSlice updates/s arrive"
      row zonechurnlratio "cluster zone: that ÷ without churn, at $HIT_RATE qps (target ≤ 1.2)"
      row zonechurnp99 "cluster zone: p99 µs at $HIT_RATE qps while $ZONE_CHURN_RATE EndpointSlice updates/s arrive"
    fi
    if [ -n "${R[bigrss|nodecache]:-}" ]; then
      row bigrss "$big: RSS MiB synced"
      row bigheap "$big: Go heap in use MiB (go_memstats_heap_inuse_bytes)"
      row biglive "$big: live heap MiB after GC (heap_alloc after /debug/pprof/heap?gc=1)"
    fi
    row zonemem "heap MiB, zone + informer stores, $big (benchtool zonemem)"
    if [ -s "$WORK/gobench.txt" ]; then
      R[zoneheap|nodecache]=$(awk '/^BenchmarkZoneBuild\/10k/ { for (i = 2; i < NF; i++) if ($(i + 1) == "heap-MB") print $i }' "$WORK/gobench.txt")
      row zoneheap "heap MB, zone tables alone, same cluster (kubezone BenchmarkZoneBuild/10k)"
    fi
  fi
  if [ -n "${R[hitcpu|variant]:-}" ]; then
    compare_table variant "with $BENCH_VARIANT_FLAGS" \
      "nodecache and nodecache with \`$BENCH_VARIANT_FLAGS\`, in this sitting (the hit and miss runs in the same rounds), forwarding rows:"
  fi
  if [ -n "${R[hitcpu|before]:-}" ]; then
    compare_table before "before" \
      "This tree beside an older build (BENCH_BEFORE_BIN=$(basename "$BENCH_BEFORE_BIN"), \`version\`: $("$BENCH_BEFORE_BIN" version 2>/dev/null | head -1 || echo "?")), measured in this sitting (the hit and miss runs in the same rounds), forwarding rows:"
  fi
  printf '\nCPU µs/answer of each max-QPS run, in round order: cache hit: floor %s; nodecache %s; CoreDNS %s; Unbound %s.' \
    "${R[hitruns|floor]:-–}" "${R[hitruns|nodecache]:-–}" "${R[hitruns|coredns]:-–}" "${R[hitruns|unbound]:-–}"
  printf ' Cache hit at 100 outstanding: floor %s; nodecache %s; CoreDNS %s; Unbound %s.' \
    "${R[hit100runs|floor]:-–}" "${R[hit100runs|nodecache]:-–}" "${R[hit100runs|coredns]:-–}" "${R[hit100runs|unbound]:-–}"
  printf ' Miss (round i: every server in turn on the same %s never-asked names, in round order): nodecache %s; CoreDNS %s; Unbound %s.' \
    "$MISS_RUN" "${R[missruns|nodecache]:-–}" "${R[missruns|coredns]:-–}" "${R[missruns|unbound]:-–}"
  printf ' Cache hit p99 µs at %s qps: floor %s; nodecache %s; CoreDNS %s; Unbound %s.' \
    "$HIT_RATE" "${R[hitp99runs|floor]:-–}" "${R[hitp99runs|nodecache]:-–}" "${R[hitp99runs|coredns]:-–}" "${R[hitp99runs|unbound]:-–}"
  if [ -n "${R[hitp99below|nodecache]:-}" ]; then
    printf ' Rounds whose p99 was below Unbound'"'"'s run of the same round, of %s: floor %s; nodecache %s; CoreDNS %s.' \
      "$LAT_REPEAT" "${R[hitp99below|floor]:-–}" "${R[hitp99below|nodecache]}" "${R[hitp99below|coredns]:-–}"
  fi
  if [ -n "${R[zoneruns|nodecache]:-}" ]; then
    printf ' Cluster zone: nodecache %s; CoreDNS + cache 30 %s; CoreDNS alone %s.' \
      "${R[zoneruns|nodecache]}" "${R[zoneruns|coredns]:-–}" "${R[zonerunsnc|coredns]:-–}"
  fi
  if [ -n "${R[zonechurnruns|nodecache]:-}" ]; then
    printf ' Cluster zone under churn: nodecache %s (%s updates/s written, %s applied by the zone in all).' \
      "${R[zonechurnruns|nodecache]}" "${R[zonechurnrate|nodecache]:-–}" "${R[zonechurnevents|nodecache]:-–}"
    printf ' Cluster zone at %s qps: nodecache %s; under churn %s. Zone under churn ÷ without, each round (round order): at max QPS %s; at %s qps %s.' \
      "$HIT_RATE" "${R[zonelruns|nodecache]:-–}" "${R[zonechurnlruns|nodecache]:-–}" \
      "${R[zonechurnrelruns|nodecache]:-–}" "$HIT_RATE" "${R[zonechurnlrelruns|nodecache]:-–}"
  fi
  printf '\n'
  cat <<EOF

Cluster-zone queries (\`benchtool cluster\`): $ZONE_SERVICES services × $ZONE_ENDPOINTS ready endpoints in 10
namespaces, every 10th headless, loaded into one kube-apiserver that both servers watch; per ten queries six
A, one SRV, one PTR, one AAAA (NODATA), one unknown service (NXDOMAIN). nodecache has no cache in front of its
zone; the CoreDNS rows are the stock Corefile (\`kubernetes\` + \`cache 30\`) and the plugin alone. The churn
rows run the same queries against the same nodecache while \`benchtool slicechurn\` updates $ZONE_CHURN_RATE
EndpointSlices a second (one service's first endpoint not ready, or ready again), from 2 s before the run.
nodecache's zone rows are taken in $REPEAT rounds: each round runs the queries without churn and with it back to
back (a max-QPS run and a $HIT_RATE qps run each; which goes first alternates), and each "÷ without churn" row is
the median of the rounds' ratios, every round's ratio listed above; nodecache's zone latency rows are the
median of its $REPEAT runs without churn. The API server's work shares CPU 1 with dnsperf, which then sends
less, and fewer queries a second batch less per wake-up, so the max-QPS ratio carries that too; the
fixed-rate ratio does not.
EOF
  if [ -n "${R[hitp99rel|floor]:-}" ]; then
    cat <<EOF

How to read the cache-hit p99 ratio to Unbound: the floor server (its ratio in the row's label, its rounds below
Unbound's under the table) does no DNS work, so its ratio is what the machine's scheduling alone gives a server
at this run's priority ($PRIO_TEXT, at which the machine's other work still gets CPU time). A server's
ratio tells about the server only as far as it stands apart from the floor's: where the floor's own ratio is
near 1, or it is below Unbound's in barely more than half the rounds, a ratio near 1 is the machine's noise and
not a ranking. \`bench/hitab.sh\` with \`HITAB_PRIO="chrt -f 20"\` measures these runs at SCHED_FIFO, where
nothing of normal priority runs on the two CPUs while a server or the client has work.
EOF
  fi
  if [ -s "$WORK/gobench.txt" ]; then
    printf '\n## go test -bench\n\n    go test -run %s -bench . -benchmem ./pkg/wire ./pkg/server ./pkg/cache ./pkg/kubezone\n\n```\n' "'^\$'"
    grep -E '^(Benchmark|pkg:|ok|FAIL|---)' "$WORK/gobench.txt"
    printf '```\n'
  fi
  if [ "${BENCH_PROFILE:-1}" = 1 ] && [ -s "$PROFILE_DIR/hit.top.txt" ]; then
    printf '\n## CPU profile of the hit path\n\n'
    printf 'The serving process under the max-QPS hit load, this run (`go tool pprof -top`, its first %s lines).\n' "$HIT_PROFILE_LINES"
    printf 'The time in the system calls (`linux.Syscall6`: recvmmsg and sendmmsg) is the socket work the\n'
    printf 'floor server pays too; the rest is the Go side of each answer. The profiles (hit path; miss path on\n'
    printf 'never-asked AAAA names), their tops and the binary are kept in %s.\n\n```\n' "$PROFILE_DIR"
    head -n "$HIT_PROFILE_LINES" "$PROFILE_DIR/hit.top.txt"
    printf '```\n'
  fi
}
