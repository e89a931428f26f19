package agent

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/rewrite"
	"github.com/nodecache/nodecache/pkg/server"
	"github.com/nodecache/nodecache/pkg/static"
	"github.com/nodecache/nodecache/pkg/wire"
)

// answerAll is an Exchanger that answers every A query at once.
type answerAll struct{}

func (answerAll) Exchange(_ context.Context, key wire.Key, _ time.Time) (wire.UpstreamReply, netip.AddrPort, error) {
	m := new(dns.Msg)
	m.SetQuestion(key.PresentationName(), key.Type)
	m.Response = true
	m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: m.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 1)}}
	m.Compress = true
	raw, err := m.Pack()
	if err != nil {
		return wire.UpstreamReply{}, netip.AddrPort{}, err
	}
	r, err := wire.ReadUpstream(raw)
	return r, netip.AddrPort{}, err
}

// BenchmarkResolverLookupHit is a cache hit through the resolver the
// server calls: without local answers, and with the (empty) static table
// and rule list every agent now has. The difference is what static
// records and rewrites cost a cache hit.
func BenchmarkResolverLookupHit(b *testing.B) {
	c, err := cache.New(cache.Config{}, answerAll{}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	req := new(dns.Msg)
	req.SetQuestion("www.example.org.", dns.TypeA)
	pkt, _ := req.Pack()
	var q wire.Query
	if err := wire.Parse(pkt, &q); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Resolve(context.Background(), q.Key(), time.Time{}); err != nil {
		b.Fatal(err)
	}
	st, err := static.New(static.Config{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	local := st.Wrap(rewrite.NewResolver(nil, rewrite.Local{Static: st}, c)) // as localResolver stacks them
	for _, bc := range []struct {
		name string
		r    server.Resolver
	}{{"cache only", c}, {"with local answers", local}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			now := time.Now()
			for b.Loop() {
				if _, _, ok := bc.r.Lookup(&q, now); !ok {
					b.Fatal("miss")
				}
			}
		})
	}
}
