package server

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/wire"
)

// missResolver misses every lookup and resolves every key at once to one
// prepacked answer: the server's own share of a miss.
type missResolver struct{ p *wire.Packed }

func (missResolver) Lookup(*wire.Query, time.Time) (*wire.Packed, wire.TTLMode, bool) {
	return nil, wire.TTLMode{}, false
}

func (r missResolver) Resolve(context.Context, wire.Key, time.Time) (wire.Answer, error) {
	return wire.Answer{Packed: r.p, Source: wire.SourceUpstream}, nil
}

// BenchmarkServeDatagramMiss is a miss as the UDP read loop serves it,
// with an instant resolver: the fast path missing, the hand-off to a
// slow-path worker, the reply written to a loopback socket and the
// accounting. allocs/op are the server's own per miss.
func BenchmarkServeDatagramMiss(b *testing.B) {
	m := new(dns.Msg)
	m.SetQuestion("www.example.org.", dns.TypeA)
	m.SetEdns0(1232, false)
	pkt, _ := m.Pack()
	reply := new(dns.Msg).SetReply(m)
	reply.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "www.example.org.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
		A: net.IPv4(192, 0, 2, 1)}}
	p, err := wire.Pack(reply)
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{Addrs: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}}, Deps{Resolver: missResolver{p}},
		prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sink.Close() })
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	client := sink.LocalAddr().(*net.UDPAddr).AddrPort()
	go func() { // drain the replies
		buf := make([]byte, 512)
		for {
			if _, err := sink.Read(buf); err != nil {
				return
			}
		}
	}()
	var q wire.Query
	rq := &discardQueue{out: make([]byte, 0, 4096)}
	b.ReportAllocs()
	for b.Loop() {
		s.serveDatagram(c, pkt, client, &q, time.Now(), rq, nil)
		s.queries.Wait()
	}
}
