package agent

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/time/rate"

	"github.com/nodecache/nodecache/pkg/server"
	"github.com/nodecache/nodecache/pkg/wire"
)

// queryLogConfig is the sampled query log's settings. Rate 0 (the
// default) turns it off.
type queryLogConfig struct {
	Rate     float64 // lines a second at most (burst the same, at least 1)
	Sample   int     // log one in Sample of the queries that pass the filters
	clients  string  // comma list of IPs and CIDR prefixes; "" any
	suffixes string  // comma list of name suffixes; "" any
	rcodes   string  // comma list of rcode names; "" any
}

func (c *queryLogConfig) register(fs *flag.FlagSet) {
	fs.Float64Var(&c.Rate, "query-log-rate", 0, "log answered queries, at most this many lines a second (0: no query log)")
	fs.IntVar(&c.Sample, "query-log-sample", 1, "query log: one in this many of the queries that pass the filters")
	fs.StringVar(&c.clients, "query-log-client", "", "query log: only these clients (comma list of IPs and CIDRs)")
	fs.StringVar(&c.suffixes, "query-log-suffix", "", "query log: only names at or below these suffixes (comma list)")
	fs.StringVar(&c.rcodes, "query-log-rcode", "", "query log: only answers with these rcodes (comma list, e.g. NXDOMAIN,SERVFAIL)")
}

func (c *queryLogConfig) validate() error {
	if c.Rate < 0 || c.Sample < 1 {
		return errors.New("--query-log-rate must not be negative and --query-log-sample must be at least 1")
	}
	_, err := c.filters()
	return err
}

// queryLogFilters are the parsed filters.
type queryLogFilters struct {
	clients  []netip.Prefix
	suffixes []string // FQDNs, lowercased
	rcodes   map[int]bool
}

func (c *queryLogConfig) filters() (queryLogFilters, error) {
	f := queryLogFilters{rcodes: map[int]bool{}}
	for _, s := range splitList(c.clients) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			ip, err2 := netip.ParseAddr(s)
			if err2 != nil {
				return f, fmt.Errorf("--query-log-client %q: want an IP or a CIDR prefix", s)
			}
			p = netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen())
		}
		f.clients = append(f.clients, p.Masked())
	}
	for _, s := range splitList(c.suffixes) {
		if _, ok := dns.IsDomainName(s); !ok {
			return f, fmt.Errorf("--query-log-suffix %q: want a domain name", s)
		}
		f.suffixes = append(f.suffixes, dns.Fqdn(strings.ToLower(s)))
	}
	for _, s := range splitList(c.rcodes) {
		rc, ok := dns.StringToRcode[strings.ToUpper(s)]
		if !ok {
			return f, fmt.Errorf("--query-log-rcode %q: want an rcode name such as NOERROR, NXDOMAIN, SERVFAIL or REFUSED", s)
		}
		f.rcodes[rc] = true
	}
	return f, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// queryLog logs a sample of the answered queries that pass its filters,
// at most Rate lines a second. Lines over the rate are counted, not logged.
type queryLog struct {
	log     *slog.Logger
	f       queryLogFilters
	sample  uint64
	seen    atomic.Uint64 // queries that passed the filters
	limiter *rate.Limiter
	now     func() time.Time // time.Now; tests fix it
	skipped atomic.Uint64    // sampled queries not logged: over the rate
}

var _ server.Observer = (*queryLog)(nil)

// newQueryLog returns nil when c turns the log off.
func newQueryLog(c *queryLogConfig, log *slog.Logger) (*queryLog, error) {
	if c.Rate == 0 {
		return nil, nil
	}
	f, err := c.filters()
	if err != nil {
		return nil, err
	}
	return &queryLog{log: log, f: f, sample: uint64(max(c.Sample, 1)),
		limiter: rate.NewLimiter(rate.Limit(c.Rate), max(int(c.Rate), 1)), now: time.Now}, nil
}

// Observe implements server.Observer: cheap filters first, the name
// (which costs an allocation) only for a query that will be logged.
func (l *queryLog) Observe(client netip.Addr, q *wire.Query, res server.Result, took time.Duration) {
	if len(l.f.rcodes) > 0 && !l.f.rcodes[res.Rcode] {
		return
	}
	if len(l.f.clients) > 0 && !anyContains(l.f.clients, client.Unmap()) {
		return
	}
	var name string
	if len(l.f.suffixes) > 0 {
		name = presentationName(q)
		if !anySuffix(l.f.suffixes, name) {
			return
		}
	}
	if l.seen.Add(1)%l.sample != 0 {
		return
	}
	if !l.limiter.AllowN(l.now(), 1) {
		l.skipped.Add(1)
		return
	}
	if name == "" {
		name = presentationName(q)
	}
	args := []any{"client", client, "name", name, "type", dns.Type(q.Type).String(),
		"rcode", dns.RcodeToString[res.Rcode], "source", res.Source.String(), "took", took}
	if res.Server.IsValid() {
		args = append(args, "upstream", res.Server)
	}
	if n := l.skipped.Swap(0); n > 0 {
		args = append(args, "over_rate_since_last", n)
	}
	l.log.Info("query", args...)
}

func presentationName(q *wire.Query) string {
	name, _, err := dns.UnpackDomainName(q.LowerName(), 0)
	if err != nil {
		return "?"
	}
	return name
}

func anyContains(ps []netip.Prefix, ip netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func anySuffix(suffixes []string, name string) bool {
	for _, s := range suffixes {
		if dns.IsSubDomain(s, name) {
			return true
		}
	}
	return false
}
