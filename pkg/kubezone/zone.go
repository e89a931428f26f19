package kubezone

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/logkey"
)

// Zone answers the cluster domain. Lookups never block: they read an
// immutable snapshot of each name (see table). One writer at a time (mu)
// applies queued object events and publishes the changed names.
type Zone struct {
	cfg Config
	log *slog.Logger // always non-nil
	met *metrics     // always non-nil
	now func() time.Time
	// relistSrc seeds the relist spread (relist.go); nil: seeded at random.
	relistSrc rand.Source

	tab        *table                 // always non-nil
	scopes     *scopes                // always non-nil
	domainWire []byte                 // cfg.Domain in wire form
	ptrs       *ptrIndex              // always non-nil
	meta       atomic.Pointer[meta]   // always non-nil after New
	synced     atomic.Bool            // the informers synced once
	running    atomic.Bool            // Run is active
	source     atomic.Pointer[string] // SourceNone, SourceSnapshot, SourceAPI or SourceFixture
	// syncSource is the Source once synced: SourceAPI, or SourceFixture
	// (Clients.Fixture). Set by Run before it starts anything.
	syncSource string
	localPods  atomic.Pointer[map[netip.Addr]PodInfo] // node-local pods by IP; always non-nil
	counts     objectCounts                           // object counts of the last publish
	serial0    uint32                                 // SOA serial at generation 0
	soaNS      string                                 // "ns.dns.<zone>", the SOA's MNAME
	soaMbox    string                                 // "hostmaster.<zone>", the SOA's RNAME
	podSuffix  string                                 // ".pod.<zone>"
	svcSuffix  string                                 // ".svc.<zone>"
	// snapWritten is the write time (Unix ns) of the snapshot loaded, 0
	// without one; snapRefused why the snapshot was refused, nil if it was not.
	snapWritten atomic.Int64
	snapRefused atomic.Pointer[snapRefusal]

	qmu   sync.Mutex // guards queue
	queue []event
	kick  chan struct{} // capacity 1: the queue is not empty

	mu         sync.Mutex // guards following; lock order: mu before qmu
	st         *state
	snapDirty  bool          // the zone changed since the last snapshot write
	spare      *batch        // drain's batch, empty between drains; always non-nil
	queueSpare []event       // the queue's next array, empty
	scratch    writerScratch // reused by the writer from one service to the next
}

// meta is the per-generation data of the zone, one allocation per
// generation.
type meta struct {
	gen   uint64
	soaRR []dns.RR   // the single current SOA, for the apex answer and negative answers
	rev4  []dns.RR   // SOA of in-addr.arpa., for negative answers at reverse names we own
	rev6  []dns.RR   // SOA of ip6.arpa.
	rrs   [3]dns.RR  // backs the three slices above: the SOAs below
	soas  [3]dns.SOA // of the zone, in-addr.arpa. and ip6.arpa.
}

// state is the writer's view of the cluster: the object models and what
// each service contributed to the table. Guarded by Zone.mu.
type state struct {
	namespaces  map[string]bool          // Namespace objects (value: from snapshot)
	services    map[string]*svcModel     // by ns/name
	slices      map[string]*sliceModel   // by ns/name of the slice
	slicesBySvc map[string][]*sliceModel // service ns/name → its slices, sorted by name
	pods        map[string]*podModel     // by ns/name
	contrib     map[string]*svcRef       // service ns/name → its entry (what it contributed)
	nsRefs      map[string]int           // namespace → number of services in it
	podRecs     map[string]int           // verified pod name → number of pods with that IP in that namespace
	endpoints   int                      // distinct ready endpoint addresses, summed over services
	hostNames   int                      // endpoint host names (answered from entries), summed over services
}

func newState() *state {
	return &state{
		namespaces: map[string]bool{}, services: map[string]*svcModel{}, slices: map[string]*sliceModel{},
		slicesBySvc: map[string][]*sliceModel{}, pods: map[string]*podModel{}, contrib: map[string]*svcRef{},
		nsRefs: map[string]int{}, podRecs: map[string]int{},
	}
}

// New validates cfg and returns an empty zone. reg may be nil: the metrics
// are then kept but registered nowhere. log may be nil: logs are then
// discarded.
func New(cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Zone, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("creating zone: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	met, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("creating zone: %w", err)
	}
	z := &Zone{cfg: cfg, log: log.With(logkey.Component, "kubezone"), met: met, now: time.Now,
		kick: make(chan struct{}, 1), st: newState(), spare: newBatch(), tab: newTable(), ptrs: newPTRIndex(), scopes: newScopes(),
		serial0: uint32(time.Now().Unix()), soaNS: "ns.dns." + cfg.Domain, soaMbox: "hostmaster." + cfg.Domain,
		podSuffix: ".pod." + cfg.Domain, svcSuffix: ".svc." + cfg.Domain}
	z.domainWire = make([]byte, len(cfg.Domain)+1)
	n, err := dns.PackDomainName(cfg.Domain, z.domainWire, 0, nil, false)
	if err != nil {
		return nil, fmt.Errorf("creating zone: domain %q: %w", cfg.Domain, err)
	}
	z.domainWire = z.domainWire[:n]
	empty := map[netip.Addr]PodInfo{}
	z.localPods.Store(&empty)
	src := SourceNone
	z.source.Store(&src)
	z.met.setSource(src)
	z.meta.Store(z.newMeta(0))
	z.tab.apply(z.staticNodes())
	return z, nil
}

// newMeta returns the per-generation data of generation gen.
func (z *Zone) newMeta(gen uint64) *meta {
	m := &meta{gen: gen}
	for i, owner := range [3]string{z.cfg.Domain, "in-addr.arpa.", "ip6.arpa."} {
		m.soas[i] = z.soa(owner, gen)
		m.rrs[i] = &m.soas[i]
	}
	m.soaRR, m.rev4, m.rev6 = m.rrs[0:1:1], m.rrs[1:2:2], m.rrs[2:3:3]
	return m
}

// soa is the SOA record at owner d of generation gen.
func (z *Zone) soa(d string, gen uint64) dns.SOA {
	neg := z.cfg.negTTLSeconds()
	return dns.SOA{Hdr: dns.RR_Header{Name: d, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: neg},
		Ns: z.soaNS, Mbox: z.soaMbox, Serial: z.serial0 + uint32(gen), Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: neg}
}

// staticNodes are the names that exist whatever the cluster holds.
func (z *Zone) staticNodes() map[string]*node {
	d, ttl := z.cfg.Domain, z.cfg.ttlSeconds()
	nsName := z.soaNS
	var glue []dns.RR
	for _, ip := range z.cfg.LocalIPs {
		glue = append(glue, addrRR(nsName, ip.Unmap(), ttl))
	}
	ns := &dns.NS{Hdr: dns.RR_Header{Name: d, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: ttl}, Ns: nsName}
	txt := &dns.TXT{Hdr: dns.RR_Header{Name: "dns-version." + d, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 28800},
		Txt: []string{"1.1.0"}}
	return map[string]*node{
		d:                  newNode([]dns.RR{ns}, glue, kindApex),
		"dns-version." + d: newNode([]dns.RR{txt}, nil, kindStatic),
		"svc." + d:         newNode(nil, nil, kindStatic),
		"pod." + d:         newNode(nil, nil, kindStatic),
		"dns." + d:         newNode(nil, nil, kindStatic),
		nsName:             newNode(glue, nil, kindStatic),
	}
}

// Generation increments on every change of the zone. Read it before
// Lookup: an answer is then at least as new as the generation.
// A snapshot past its maximum age flips the top bit, so that answers kept
// by generation (the server's memo) are not served from it.
func (z *Zone) Generation() uint64 {
	g := z.meta.Load().gen
	if z.snapshotStale() {
		g |= 1 << 63
	}
	return g
}

// Synced reports whether the informers have synced once and their initial
// objects are in the zone.
func (z *Zone) Synced() bool { return z.synced.Load() }

// Source is where the zone's data comes from: "none", "snapshot", "api"
// or "fixture".
func (z *Zone) Source() string { return *z.source.Load() }

func (z *Zone) setSource(s string) {
	z.source.Store(&s)
	z.met.setSource(s)
}

// authoritative reports whether negative answers may be given: the zone
// holds a complete view, from the API server or from a snapshot not past
// its maximum age.
func (z *Zone) authoritative() bool {
	return z.synced.Load() || z.Source() == SourceSnapshot && !z.snapshotStale()
}

// Stats are counts for status pages and metrics.
type Stats struct {
	Namespaces     int
	Services       int
	EndpointSlices int
	Endpoints      int // distinct ready endpoint addresses, summed over services
	Pods           int // pods watched (node-local, or cluster-wide in verified mode)
	LocalPods      int // node-local pod IPs known to PodByIP
	Names          int // owner names in the zone: in the table, endpoint host names and reverse names
	Synced         bool
	Source         string
	Generation     uint64
}

// Stats returns current counts without blocking (the object counts are
// those of the last published generation).
func (z *Zone) Stats() Stats {
	s := z.counts.load()
	s.LocalPods = len(*z.localPods.Load())
	s.Names += int(z.tab.names.Load()) // counts holds the names answered from entries and the PTR index
	s.Synced, s.Source, s.Generation = z.Synced(), z.Source(), z.Generation()
	return s
}

// metrics of the zone; registered on the Registerer given to New.
type metrics struct {
	objects     *prometheus.GaugeVec     // kind
	synced      prometheus.Gauge         //
	source      *prometheus.GaugeVec     // source
	programming *prometheus.HistogramVec // from: event | write
	snapWrites  *prometheus.CounterVec   // result: ok | error
	relists     prometheus.Counter       // lists after a watch, every informer
	relistWait  prometheus.Counter       // seconds those waited in the spread
	watchPanics prometheus.Counter       // EndpointSlice watch panics recovered

	// The children the writer sets on every publish, resolved once: a
	// WithLabelValues per publish hashed its labels each time.
	kindGauges           [5]prometheus.Gauge // by objectKinds
	fromEvent, fromWrite prometheus.Observer
}

// objectKinds are the values of the kind label of nodecache_zone_objects.
var objectKinds = [5]string{"namespaces", "services", "endpointslices", "endpoints", "pods"}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nodecache_zone_objects",
			Help: "Objects the cluster zone is built from, by kind (namespaces, services, endpointslices, endpoints, pods)."},
			[]string{"kind"}),
		synced: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nodecache_zone_synced",
			Help: "1 once the informers have synced and the zone holds their objects, else 0."}),
		source: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nodecache_zone_source",
			Help: "1 for the current source of the zone's data (none, snapshot, api, fixture), 0 for the others."},
			[]string{"source"}),
		programming: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nodecache_zone_programming_duration_seconds",
			Help: "Time from an object change to the zone answering it: from=event since the watch delivered " +
				"it, from=write (best effort, second resolution) since the object's last write time.",
			Buckets: []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60},
		}, []string{"from"}),
		snapWrites: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodecache_zone_snapshot_writes_total",
			Help: "Snapshot writes by result (ok, error)."}, []string{"result"}),
		relists: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodecache_zone_relists_total",
			Help: "Relists: lists one of the zone's watches sent after it had watched (after a 410 when the API server " +
				"restarts, or a watch error). Its first sync and the retries of a failed relist are not counted."}),
		relistWait: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodecache_zone_relist_wait_seconds_total",
			Help: "Seconds relists were held back by --relist-spread before they went to the API server, counted when each wait starts."}),
		watchPanics: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodecache_zone_watch_panics_total",
			Help: "Panics in the EndpointSlice watch, recovered: each one is logged with its stack and followed by a relist. Any is a bug to report."}),
	}
	for i, k := range objectKinds {
		m.kindGauges[i] = m.objects.WithLabelValues(k)
	}
	m.fromEvent, m.fromWrite = m.programming.WithLabelValues("event"), m.programming.WithLabelValues("write")
	for _, r := range []string{"ok", "error"} {
		m.snapWrites.WithLabelValues(r)
	}
	for _, f := range []string{"event", "write"} {
		m.programming.WithLabelValues(f)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.objects, m.synced, m.source, m.programming, m.snapWrites, m.relists, m.relistWait, m.watchPanics} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering zone metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) setSource(s string) {
	for _, v := range []string{SourceNone, SourceSnapshot, SourceAPI, SourceFixture} {
		val := 0.0
		if v == s {
			val = 1
		}
		m.source.WithLabelValues(v).Set(val)
	}
}
