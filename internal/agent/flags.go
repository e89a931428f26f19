package agent

import (
	"flag"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/iface"
	"github.com/nodecache/nodecache/pkg/kubezone"
	"github.com/nodecache/nodecache/pkg/server"
	"github.com/nodecache/nodecache/pkg/static"
	"github.com/nodecache/nodecache/pkg/upstream"
)

// NewFlagSet returns the flags of `nodecache run`, each bound to a field of
// c, with c's defaults set.
func NewFlagSet(c *Config) *flag.FlagSet {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	c.LocalIPs = []netip.Addr{netip.MustParseAddr("169.254.20.10")}
	c.CacheSize = cache.DefaultMaxBytes
	c.JournalSize = cache.DefaultJournalBytes
	fs.Var(ipListFlag{&c.LocalIPs}, "local-ip", "comma list of IPs to serve on; add the kube-dns ClusterIP to intercept it")
	fs.UintVar(&c.Port, "port", iface.DefaultPort, "DNS port")
	fs.StringVar(&c.Upstream, "upstream", "/etc/resolv.conf", "comma list of upstream IP[:port] and tls://IP[:853][#SERVER-NAME] (DNS over TLS), or a resolv.conf path")
	fs.Var(&c.StubDomains, "stub-domain", "DOMAIN=IP[:port],... [policy=P] [force-tcp] [timeout=D] [max-concurrent=N] [max-ttl=D] [max-negative-ttl=D]: send DOMAIN to its own resolvers, with its own settings (repeatable)")
	fs.StringVar(&c.KubeDNSConfig, "kube-dns-config-dir", "", "directory of a mounted kube-dns ConfigMap (stubDomains, upstreamNameservers)")
	fs.BoolVar(&c.SetupInterface, "setup-interface", true, "create the interface and its addresses")
	fs.BoolVar(&c.SetupIPTables, "setup-iptables", true, "install NOTRACK and ACCEPT rules")
	fs.StringVar(&c.InterfaceName, "interface-name", iface.DefaultInterfaceName, "name of the link that carries the local IPs")
	fs.TextVar(&c.IPTablesMode, "iptables-mode", iface.ModeAuto, "iptables backend: auto, nft or legacy")
	durationVar(fs, &c.SyncInterval, "sync-interval", iface.DefaultSyncInterval, "how often interface and rules are re-checked")
	fs.BoolVar(&c.SkipTeardown, "skip-teardown", false, "leave interface and rules in place on exit")
	fs.Var(commaListFlag{&c.AcceptInterfaces}, "accept-interfaces", "comma list of interfaces queries to the local IPs may come in on (iptables -i names, e.g. cali+,eth1); others are dropped (default: any)")
	fs.Var(prefixListFlag{&c.AcceptSources}, "accept-sources", "comma list of CIDRs queries to the local IPs may come from (e.g. the pod CIDRs); others are dropped (default: any)")

	fs.StringVar(&c.ClusterDomain, "cluster-domain", strings.TrimSuffix(kubezone.DefaultDomain, "."), "the cluster DNS domain")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig for the cluster zone (default: in-cluster config when in a pod)")
	fs.StringVar(&c.Fixture, "fixture", "", "serve the cluster zone from this YAML of Kubernetes objects instead of an API server")
	fs.StringVar(&c.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name, for its pods (default $NODE_NAME)")
	fs.StringVar((*string)(&c.Pods), "pods", string(kubezone.PodsInsecure), "pod records: insecure, verified (needs --watch-pods) or disabled")
	fs.BoolVar(&c.WatchPods, "watch-pods", false, "watch this node's pods (all pods with --pods=verified): pod names in top and tail, autopath, verified pod records; needs list and watch of pods in every namespace (deploy/overlays/pod-access)")
	durationVar(fs, &c.TTL, "ttl", kubezone.DefaultTTL, "TTL of cluster-zone answers")
	durationVar(fs, &c.NegativeTTL, "negative-ttl", kubezone.DefaultNegativeTTL, "SOA minimum (negative TTL) of the cluster zone")
	fs.StringVar(&c.ZoneSnapshot, "zone-snapshot", "", "file to persist the cluster zone to, and serve from when the API server is unreachable")
	durationVar(fs, &c.RelistSpread, "relist-spread", kubezone.DefaultRelistSpread, "after the API server restarts, wait a random delay below this before relisting, so that agents do not all relist at once (0: relist at once)")
	durationVar(fs, &c.SnapshotAge, "zone-snapshot-max-age", kubezone.DefaultSnapshotMaxAge, "oldest --zone-snapshot the zone answers from; past it cluster names get SERVFAIL until the API server answers")

	fs.Var(&c.CacheSize, "cache-size", "cache budget in bytes (units: KiB, MiB, GiB)")
	durationVar(fs, &c.MaxTTL, "max-ttl", cache.DefaultMaxTTL, "cap on cached positive TTLs")
	durationVar(fs, &c.MaxNegativeTTL, "max-negative-ttl", cache.DefaultMaxNegativeTTL, "cap on cached negative TTLs")
	fs.BoolVar(&c.Prefetch, "prefetch", true, "refresh names asked often before they expire (CoreDNS's cache prefetch; false: only on a miss)")
	durationVar(fs, &c.StaleMaxAge, "stale-max-age", cache.DefaultStaleMaxAge, "serve expired entries up to this long when upstreams fail (0 disables)")

	fs.StringVar(&c.UpstreamTLSCA, "upstream-tls-ca", "", "PEM file of the CAs that verify DNS over TLS upstreams (tls://IP[:853][#NAME] in --upstream and --stub-domain); default the system's")
	fs.StringVar((*string)(&c.UpstreamPolicy), "upstream-policy", string(upstream.PolicyRandom), "upstream choice: random, sequential or round_robin")
	fs.BoolVar(&c.UpstreamForceTCP, "upstream-force-tcp", false, "send every query to the default upstreams over TCP (CoreDNS forward's force_tcp); false: UDP first, TCP after a truncated reply (prefer_udp). Stub domains have their own force-tcp")
	durationVar(fs, &c.UpstreamTimeout, "upstream-timeout", upstream.DefaultTryTimeout, "timeout of one upstream try")
	durationVar(fs, &c.UpstreamDeadline, "upstream-deadline", upstream.DefaultDeadline, "overall deadline of a forwarded query")
	fs.IntVar(&c.MaxUpstreamInFlight, "max-upstream-inflight", upstream.DefaultMaxInFlight, "cap on queries in flight upstream; beyond it REFUSED")
	fs.IntVar(&c.MaxTCPConns, "max-tcp-conns", server.DefaultMaxTCPConns, "cap on client TCP connections")
	fs.IntVar(&c.MaxTCPConnsPerClient, "max-tcp-conns-per-client", server.DefaultMaxTCPConnsPerClient, "cap on one client IP's TCP connections; beyond it new ones are closed")
	fs.IntVar(&c.MaxInFlightPerClient, "max-inflight-per-client", server.DefaultMaxInFlightPerClient, "cap on one client IP's queries waiting for an upstream answer; beyond it REFUSED")
	durationVar(fs, &c.TCPIdleTimeout, "tcp-idle-timeout", server.DefaultTCPIdleTimeout, "close idle client TCP connections after this")

	fs.Var(&c.StaticRecords, "static-record", "\"IP NAME [NAME...]\": answer NAME with IP before the cache, as a hosts file line (repeatable)")
	fs.Var(&c.StaticFiles, "static-file", "hosts file whose lines are static records; re-read when it changes (repeatable)")
	durationVar(fs, &c.StaticTTL, "static-ttl", static.DefaultTTL, "TTL of static record answers")
	fs.BoolVar(&c.StaticNoReverse, "static-no-reverse", false, "do not answer PTR queries for the IPs of static records")
	fs.Var(&c.RewriteNames, "rewrite-name", "\"[exact|suffix] FROM TO [answer auto]\": answer FROM with what TO resolves to (repeatable)")
	fs.BoolVar(&c.Autopath, "autopath", false, "answer a pod's first search-path query for its whole search path (ends the ndots:5 storm; needs --watch-pods)")
	fs.BoolVar(&c.LoadBalance, "loadbalance", false, "shuffle the A and AAAA records of every answer, cached, cluster zone (headless Services) and upstream alike, as CoreDNS's loadbalance does, so clients that take the first address spread over all of them")
	fs.Var(commaListFlag{&c.SuppressAAAA}, "suppress-aaaa", "comma list of domains whose AAAA queries are answered NOERROR with no records (no IPv6 addresses), \".\" for every name; the node-local-dns chart's noIPv6Lookups is \".\" (default: none)")
	fs.Float64Var(&c.ClientQPSLimit, "client-qps-limit", 0, "per-client-IP query rate limit; beyond it REFUSED (0: no limit)")
	fs.IntVar(&c.ClientBurst, "client-burst", 0, "burst of --client-qps-limit (default: the limit, at least 1)")
	fs.StringVar(&c.Dnstap, "dnstap", "", "send dnstap messages (client and upstream queries and replies) to unix:///PATH or tcp://HOST:PORT (clear text: keep it on the node)")
	c.QueryLog.register(fs)
	fs.StringVar(&c.MetricsAddr, "metrics-addr", "", "Prometheus listener host:port (default <first local IP>:9253)")
	fs.BoolVar(&c.Pprof, "pprof", false, "serve net/http/pprof under /debug/pprof/ on --pprof-addr (profiling; keep it off in production)")
	fs.StringVar(&c.PprofAddr, "pprof-addr", "127.0.0.1:6053", "IP:port of the --pprof listener; not every address, nor the metrics or health listener")
	fs.StringVar(&c.HealthAddr, "health-addr", "", "health listener host:port for /healthz and /readyz (default <first local IP>:8080)")
	fs.StringVar(&c.AdminSocket, "admin-socket", "/run/nodecache/admin.sock", "root-only unix socket for the CLI")
	fs.StringVar(&c.HandoverSocket, "handover-socket", "/run/nodecache/handover.sock", "unix socket for handing listeners to a successor")
	durationVar(fs, &c.HandoverWait, "handover-timeout", 5*time.Second, "how long to wait for a predecessor's handover")
	fs.BoolVar(&c.Supervise, "supervise", true, "run the agent under a supervisor that keeps its listening sockets and a copy of its cache, and restarts it on them at once when it is killed or crashes (docs/recovery.md)")
	fs.Var(&c.JournalSize, "cache-journal-size", "memory for the copy of the cache the supervisor keeps, a ring of the most recently inserted entries (about 95 to 125 bytes each); no more than the cache size nor an eighth of the container's memory limit; 0 keeps none: a restart after a crash starts cold")
	fs.StringVar(&c.PodStateDir, "pod-state-dir", "", "pod-scoped directory (an emptyDir) for the probe socket and handover state; set in a pod: after a handover the agent then idles until its pod is deleted instead of exiting")
	fs.StringVar(&c.PodUID, "pod-uid", os.Getenv("POD_UID"), "this pod's UID, so a successor never hands the sockets back to it (default $POD_UID)")
	fs.StringVar(&c.PodName, "pod-name", os.Getenv("POD_NAME"), "this pod's name: on SIGTERM the agent tears down only if its pod is being deleted, not when just its container restarts (default $POD_NAME)")
	fs.StringVar(&c.PodNamespace, "pod-namespace", os.Getenv("POD_NAMESPACE"), "this pod's namespace (default $POD_NAMESPACE)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar((*string)(&c.LogFormat), "log-format", "text", "text or json")
	fs.StringVar(&c.ConfigFile, "config", "", "YAML file with the same settings (keys are flag names); flags win")
	durationVar(fs, &c.ConfigCheckInterval, "config-check-interval", 5*time.Second, "how often --config and the kube-dns ConfigMap are checked for changes, applied live (0: only on SIGHUP and nodecache reload)")
	return fs
}
