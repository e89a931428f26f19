package agent

import (
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/pkg/server"
	"github.com/nodecache/nodecache/pkg/wire"
)

// clientStats counts queries per client IP for `nodecache top`. It is
// bounded: past max clients, new ones are counted together as "other".
// Per-client figures are never metric labels.
type clientStats struct {
	max int

	mu      sync.Mutex // guards following
	clients map[netip.Addr]*clientCounter
	other   clientCounter
	total   clientCounter
	rcodes  [24]uint64
	sources [8]uint64
}

type clientCounter struct {
	Queries  uint64
	NXDomain uint64
	Latency  time.Duration // summed
}

var _ server.Counter = (*clientStats)(nil)

func newClientStats(limit int) *clientStats {
	return &clientStats{max: limit, clients: make(map[netip.Addr]*clientCounter)}
}

// Count implements server.Counter.
func (c *clientStats) Count(client netip.Addr, res server.Result, n uint64, took time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc, ok := c.clients[client]
	if !ok {
		if len(c.clients) < c.max {
			cc = &clientCounter{}
			c.clients[client] = cc
		} else {
			cc = &c.other
		}
	}
	for _, x := range []*clientCounter{cc, &c.total} {
		x.Queries += n
		x.Latency += took
		if res.Rcode == dns.RcodeNameError {
			x.NXDomain += n
		}
	}
	c.rcodes[min(max(res.Rcode, 0), len(c.rcodes)-1)] += n
	c.sources[min(int(res.Source), len(c.sources)-1)] += n
}

// snapshot returns the top n clients by queries, and the totals.
func (c *clientStats) snapshot(n int, pod func(netip.Addr) string) ([]adminapi.ClientRow, adminapi.Totals) {
	c.mu.Lock()
	rows := make([]adminapi.ClientRow, 0, len(c.clients)+1)
	for ip, cc := range c.clients {
		rows = append(rows, row(ip.String(), cc))
	}
	if c.other.Queries > 0 {
		rows = append(rows, row("other", &c.other))
	}
	t := adminapi.Totals{Queries: c.total.Queries, NXDomain: c.total.NXDomain, AvgMicros: avg(&c.total),
		Rcodes: map[string]uint64{}, Sources: map[string]uint64{}}
	for r, v := range c.rcodes {
		if v > 0 {
			t.Rcodes[dns.RcodeToString[r]] = v
		}
	}
	for s, v := range c.sources {
		if v > 0 {
			t.Sources[wire.Source(s).String()] = v
		}
	}
	c.mu.Unlock()
	sort.Slice(rows, func(i, j int) bool { return rows[i].Queries > rows[j].Queries })
	if len(rows) > n {
		rows = rows[:n]
	}
	for i := range rows {
		if ip, err := netip.ParseAddr(rows[i].IP); err == nil && pod != nil {
			rows[i].Pod = pod(ip)
		}
	}
	return rows, t
}

func row(ip string, cc *clientCounter) adminapi.ClientRow {
	return adminapi.ClientRow{IP: ip, Queries: cc.Queries, NXDomain: cc.NXDomain, AvgMicros: avg(cc)}
}

func avg(cc *clientCounter) float64 {
	if cc.Queries == 0 {
		return 0
	}
	return float64(cc.Latency.Microseconds()) / float64(cc.Queries)
}
