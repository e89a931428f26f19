package upstream

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// The CPU each spoofing defence adds to one upstream query, apart from the
// rest of the round trip (docs/hardening.md quotes them). The source port's
// share is BenchmarkExchangeUDPReuse: uses=16 (the bound) against
// uses=max (a socket rotated only by its 2 s age).

// hardeningQuery is a packed query for name, as Exchange builds it from a
// key, and the reply an upstream that echoes case sends to it.
func hardeningQuery(b *testing.B, name string) (req, reply []byte) {
	b.Helper()
	key, err := wire.NewKey(name, dns.TypeA, dns.ClassINET, false, false)
	if err != nil {
		b.Fatal(err)
	}
	req = key.AppendRequest(nil)
	m := new(dns.Msg)
	if err := m.Unpack(req); err != nil {
		b.Fatal(err)
	}
	reply, err = replyA(m, "192.0.2.1").Pack()
	if err != nil {
		b.Fatal(err)
	}
	return req, reply
}

// BenchmarkHardeningID is the random query ID: one draw and a store.
func BenchmarkHardeningID(b *testing.B) {
	req, _ := hardeningQuery(b, "www.example.org.")
	b.ReportAllocs()
	for b.Loop() {
		newID(req)
	}
}

// BenchmarkHardening0x20 is 0x20 on one query: the random case of the
// name, the byte compare of the reply's question with it, and the
// server's echo state (its lock and clock read), as roundTripUDP does
// them.
func BenchmarkHardening0x20(b *testing.B) {
	for _, name := range []string{"www.example.org.", "storage.googleapis.com."} {
		b.Run(name, func(b *testing.B) {
			req, reply := hardeningQuery(b, name)
			var cs caseState
			b.ReportAllocs()
			for b.Loop() {
				mixed := randomizeCase(req)
				copy(reply[headerSize:], req[headerSize:headerSize+questionNameLen(req)]) // an upstream that echoes
				if !cs.accept(caseEchoed(reply, req), mixed, time.Now()) {
					b.Fatal("echoed reply refused")
				}
			}
		})
	}
}

// BenchmarkHardeningPort is what a fresh source port costs: dialling a
// connected UDP socket (socket, connect, epoll registration), the idle
// check a pooled socket gets, and closing it. A socket serves udpMaxUses
// queries, so a query pays ns/op ÷ udpMaxUses (ns/query).
func BenchmarkHardeningPort(b *testing.B) {
	ts := startServer(b, answerA("192.0.2.1"))
	addr := net.UDPAddrFromAddrPort(ts.addr)
	b.ReportAllocs()
	for b.Loop() {
		u, err := dialUDP(addr, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		if !u.quiet() {
			b.Fatal("a fresh socket has something queued")
		}
		if err := u.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/udpMaxUses, "ns/query")
}

// BenchmarkHardeningIdleCheck is the check every query makes of the pooled
// socket it takes (quiet: one recvfrom with MSG_PEEK), so that nothing a
// past query left queued (a late or duplicate reply, a forgery aimed at
// the port, an ICMP error) is read by this one.
func BenchmarkHardeningIdleCheck(b *testing.B) {
	ts := startServer(b, answerA("192.0.2.1"))
	u, err := dialUDP(net.UDPAddrFromAddrPort(ts.addr), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = u.Close() })
	b.ReportAllocs()
	for b.Loop() {
		if !u.quiet() {
			b.Fatal("an idle socket has something queued")
		}
	}
}
