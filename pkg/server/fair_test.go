package server

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// udpFrom opens a UDP socket from the loopback IP from to addr.
func udpFrom(t *testing.T, from string, addr netip.AddrPort) *dns.Conn {
	t.Helper()
	u, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(from)}, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	return &dns.Conn{Conn: u}
}

// TestPerClientInFlightShare has one client send more misses than the
// server's whole in-flight cap for names whose answer never comes: it gets
// its share of slots and REFUSED beyond, while a second client's misses
// still get slots and answers.
func TestPerClientInFlightShare(t *testing.T) {
	const total, share, flood = 20, 8, 30
	r := newBlockingResolver()
	defer close(r.release)
	_, addr := startServer(t, Config{MaxInFlight: total, MaxInFlightPerClient: share}, nil, r)

	a := udpFrom(t, "127.0.0.1", addr)
	for i := 0; i < flood; i++ {
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("r%d.block.", i), dns.TypeA)
		if err := a.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	_ = a.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := 0; i < flood-share; i++ {
		m, err := a.ReadMsg()
		if err != nil {
			t.Fatalf("flooding client's reply %d: %v", i, err)
		}
		if m.Rcode != dns.RcodeRefused {
			t.Errorf("flooding client beyond its share: got %s, want REFUSED", dns.RcodeToString[m.Rcode])
		}
	}
	waitFor(t, "the flood's misses upstream", func() bool { return r.blocked.Load() == share })

	b := udpFrom(t, "127.0.0.2", addr)
	for i := 0; i < share-1; i++ { // its own misses wait upstream too, in its own share
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("b%d.block.", i), dns.TypeA)
		if err := b.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the second client's misses upstream", func() bool { return r.blocked.Load() == 2*share-1 })
	m := new(dns.Msg)
	m.SetQuestion("answered.example.", dns.TypeA)
	if err := b.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
	_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
	if rep, err := b.ReadMsg(); err != nil || rep.Rcode != dns.RcodeSuccess || len(rep.Answer) != 1 {
		t.Errorf("second client's miss during the flood: got %v, %v; want an answer", rep, err)
	}
}
