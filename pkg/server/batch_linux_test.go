//go:build linux

package server

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestBatchedBurst sends bursts from several clients, v4 and v6, so that
// recvmmsg returns many datagrams at once and sendmmsg sends many replies,
// and checks that every query gets its own answer back at its own address.
func TestBatchedBurst(t *testing.T) {
	addrs := []string{"127.0.0.1"}
	if c, err := net.ListenPacket("udp6", "[::1]:0"); err == nil {
		c.Close()
		addrs = append(addrs, "::1")
	} else {
		t.Logf("no IPv6 loopback here (%v): testing IPv4 only", err)
	}
	for _, ip := range addrs {
		t.Run(ip, func(t *testing.T) {
			f := &fakeResolver{}
			_, addr := startServerOn(t, netip.MustParseAddr(ip), 1, Config{}, Deps{Resolver: f})
			// Warm the cache so the burst is served inline by the batch loop.
			for i := 0; i < 4; i++ {
				exchange(t, addr.String(), name(i), dns.TypeA)
			}
			const clients, perClient = 4, 100
			conns := make([]*net.UDPConn, clients)
			for i := range conns {
				c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				_ = c.SetReadBuffer(1 << 20)
				conns[i] = c
			}
			want := map[*net.UDPConn]map[uint16]string{}
			for _, c := range conns {
				want[c] = map[uint16]string{}
				for j := 0; j < perClient; j++ {
					m := new(dns.Msg)
					m.SetQuestion(name(j%4), dns.TypeA)
					m.Id = uint16(j + 1)
					want[c][m.Id] = name(j % 4)
					if _, err := c.Write(mustPack(t, m)); err != nil {
						t.Fatal(err)
					}
				}
			}
			buf := make([]byte, 2048)
			for _, c := range conns {
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				for len(want[c]) > 0 {
					n, err := c.Read(buf)
					if err != nil {
						t.Fatalf("%d replies missing: %v", len(want[c]), err)
					}
					var r dns.Msg
					if err := r.Unpack(buf[:n]); err != nil {
						t.Fatal(err)
					}
					wantName, ok := want[c][r.Id]
					if !ok || r.Question[0].Name != wantName || len(r.Answer) != 1 {
						t.Fatalf("reply id %d for %s: not a query of this client, or wrong answer %v", r.Id, r.Question[0].Name, r.Answer)
					}
					delete(want[c], r.Id)
				}
			}
			if got := f.calls.Load(); got != 4 {
				t.Errorf("resolver calls: got %d, want 4 (the burst is all cache hits)", got)
			}
		})
	}
}

func name(i int) string { return string(rune('a'+i)) + ".burst.example." }
