package static

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/logkey"
	"github.com/nodecache/nodecache/pkg/wire"
)

// Defaults applied to zero Config fields.
const (
	DefaultTTL    = time.Hour
	DefaultReload = 5 * time.Second
)

// Config configures Records. The zero value is an empty table.
type Config struct {
	// Entries are inline hosts lines, "IP NAME [NAME...]".
	Entries []string
	// Files are hosts files, read at New and watched.
	Files []string
	// TTL of every answer; zero means DefaultTTL. At least 1s.
	TTL time.Duration
	// Reload is how often Run checks the files for changes; zero means
	// DefaultReload, negative never.
	Reload time.Duration
	// NoReverse leaves out the PTR records of the IPs.
	NoReverse bool
}

// Records answers from the table. Safe for concurrent use.
type Records struct {
	cfg  Config
	log  *slog.Logger
	m    *metrics
	cur  atomic.Pointer[table] // never nil after New
	mu   sync.Mutex            // guards following; serialises reloads
	seen map[string]fileStamp  // file -> what was read last
}

// fileStamp is what a file held when last read: a hash of its bytes.
// Comparing contents, not size and modification time, catches an edit
// that keeps both (and a ConfigMap volume's symlink swap).
type fileStamp [sha256.Size]byte

type metrics struct {
	names   prometheus.Gauge
	reloads *prometheus.CounterVec
}

// New validates cfg, reads the files and builds the table. reg may be nil:
// the metrics are then kept but registered nowhere. log may be nil: logs
// are then discarded.
func New(cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Records, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = withDefaults(cfg)
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	r := &Records{cfg: cfg, log: log, seen: map[string]fileStamp{}, m: &metrics{
		names: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nodecache_static_names", Help: "Names in the static records table."}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodecache_static_reloads_total",
			Help: "Reloads of the static records files, by result (ok, error)."}, []string{"result"}),
	}}
	t, err := r.load()
	if err != nil {
		return nil, err
	}
	r.swap(t)
	for _, c := range []prometheus.Collector{r.m.names, r.m.reloads} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering static records metrics: %w", err)
		}
	}
	return r, nil
}

// Prepare checks cfg and reads its files into a table without using it;
// commit makes cfg and the table live. For a config reload that must be
// refused whole when any part of it is wrong.
func (r *Records) Prepare(cfg Config) (commit func(), err error) {
	cfg = withDefaults(cfg)
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	next := &Records{cfg: cfg, log: r.log, m: r.m}
	t, err := next.load()
	if err != nil {
		return nil, err
	}
	return func() {
		r.mu.Lock()
		r.cfg, r.seen = cfg, next.seen
		r.swap(t)
		r.mu.Unlock()
	}, nil
}

func withDefaults(cfg Config) Config {
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Reload == 0 {
		cfg.Reload = DefaultReload
	}
	return cfg
}

func checkConfig(cfg Config) error {
	if cfg.TTL < time.Second {
		return fmt.Errorf("static records: TTL %v: want at least 1s", cfg.TTL)
	}
	return nil
}

// load reads every entry and file into a new table.
func (r *Records) load() (*table, error) {
	var entries []hostsEntry
	for i, line := range r.cfg.Entries {
		e, err := parseHosts(fmt.Sprintf("static entry %d", i+1), line)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e...)
	}
	seen := map[string]fileStamp{}
	for _, path := range r.cfg.Files {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading hosts file: %w", err)
		}
		e, err := parseHosts(path, string(data))
		if err != nil {
			return nil, err
		}
		entries = append(entries, e...)
		seen[path] = sha256.Sum256(data)
	}
	t, err := buildTable(entries, uint32(r.cfg.TTL/time.Second), r.cfg.NoReverse)
	if err != nil {
		return nil, err
	}
	r.seen = seen
	return t, nil
}

func (r *Records) swap(t *table) {
	r.cur.Store(t)
	r.m.names.Set(float64(len(t.names)))
}

// Reload re-reads the files now. On error the table stays as it was.
func (r *Records) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, err := r.load()
	if err != nil {
		r.m.reloads.WithLabelValues("error").Inc()
		return err
	}
	r.swap(t)
	r.m.reloads.WithLabelValues("ok").Inc()
	return nil
}

// changed reports whether a file's contents differ from the last read
// (a ConfigMap volume swaps a symlink: ReadFile follows it).
func (r *Records) changed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, path := range r.cfg.Files {
		data, err := os.ReadFile(path)
		if err != nil || sha256.Sum256(data) != r.seen[path] {
			return true // an error is reported through the reload
		}
	}
	return false
}

// Run checks the files every Config.Reload until ctx ends.
func (r *Records) Run(ctx context.Context) error {
	r.mu.Lock()
	every := r.cfg.Reload // files may come with a later Prepare: tick anyway
	r.mu.Unlock()
	if every < 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !r.changed() {
			continue
		}
		if err := r.Reload(); err != nil {
			if !failing {
				r.log.Error("static records: keeping the previous table", logkey.Err, err)
			}
			failing = true
			continue
		}
		failing = false
		r.log.Info("static records reloaded", "names", len(r.cur.Load().names))
	}
}

// Lookup answers q when its name is in the table. It does not allocate
// for A, AAAA and PTR questions of names that have such records.
func (r *Records) Lookup(q *wire.Query) (*wire.Packed, bool) {
	na, ok := r.cur.Load().names[string(q.LowerName())]
	if !ok {
		return nil, false
	}
	slot := -1
	switch q.Type {
	case dns.TypeA:
		slot = slotA
	case dns.TypeAAAA:
		slot = slotAAAA
	case dns.TypePTR:
		slot = slotPTR
	}
	if slot >= 0 && na.packed[slot] != nil {
		return na.packed[slot], true
	}
	p, err := answer(na.fqdn, q.Type, nil) // NODATA: the name exists
	if err != nil {
		r.log.Warn("static records: packing NODATA", logkey.Err, err)
		return nil, false
	}
	return p, true
}

// LookupName is Lookup for a name given as a lowercased FQDN, for
// callers without a parsed query (a rewritten name). It allocates.
func (r *Records) LookupName(name string, qtype uint16) (*dns.Msg, bool) {
	buf := make([]byte, 256)
	n, err := dns.PackDomainName(name, buf, 0, nil, false)
	if err != nil {
		return nil, false
	}
	na, ok := r.cur.Load().names[string(buf[:n])]
	if !ok {
		return nil, false
	}
	var rrs []dns.RR
	switch qtype {
	case dns.TypeA:
		rrs = na.a
	case dns.TypeAAAA:
		rrs = na.aaaa
	case dns.TypePTR:
		rrs = na.ptr
	}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Response, m.Authoritative, m.RecursionAvailable = true, true, true
	for _, rr := range rrs {
		m.Answer = append(m.Answer, dns.Copy(rr))
	}
	return m, true
}

// LookupNameIfAny is LookupName on a nil Records too (no answer).
func (r *Records) LookupNameIfAny(name string, qtype uint16) (*dns.Msg, bool) {
	if r == nil {
		return nil, false
	}
	return r.LookupName(name, qtype)
}
