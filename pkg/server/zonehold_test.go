package server

import (
	"testing"
	"time"

	"github.com/miekg/dns"
)

// waitHeld waits until the zone hold keeps n queries.
func waitZoneHeld(t *testing.T, s *Server, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); countHeld(s.zoneHold.Load()) < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("zone hold keeps %d queries, want %d", countHeld(s.zoneHold.Load()), n)
		}
	}
}

// exchangeAsync sends name's A query over net ("udp" or "tcp") and
// delivers the reply (nil on an error) on the channel it returns.
func exchangeAsync(addr, network, name string) <-chan *dns.Msg {
	reply := make(chan *dns.Msg, 1)
	go func() {
		m := new(dns.Msg).SetQuestion(name, dns.TypeA)
		r, _, _ := (&dns.Client{Net: network, Timeout: 30 * time.Second}).Exchange(m, addr)
		reply <- r
	}()
	return reply
}

// Before the zone has listed, a name it answers with records already (a
// snapshot) is answered, and so are names outside the zone; a negative
// answer waits, over UDP and TCP, and comes as the zone gives it once
// ready is closed.
func TestHoldZoneUntilListed(t *testing.T) {
	f := &fakeResolver{}
	z := &fakeZone{}
	s, addr := startServer(t, Config{}, z, f)
	ready := make(chan struct{})
	s.HoldZone(ready)

	// exchange fails the test on a timeout: these are not held.
	if r := exchange(t, addr.String(), "web.default.svc.cluster.local.", dns.TypeA); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("a name the zone answers during the hold: %v", r)
	}
	if r := exchange(t, addr.String(), "miss.example.", dns.TypeA); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("a miss outside the zone during the hold: %v", r)
	}
	udp := exchangeAsync(addr.String(), "udp", "new.default.svc.cluster.local.")
	waitZoneHeld(t, s, 1)
	lookups := z.lookups.Load()
	tcp := exchangeAsync(addr.String(), "tcp", "new2.default.svc.cluster.local.")
	for deadline := time.Now().Add(10 * time.Second); z.lookups.Load() == lookups; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the TCP query never reached the zone")
		}
	}
	ptr := exchangeAsync(addr.String(), "udp", "9.9.0.10.in-addr.arpa.") // a reverse name: the zone's or upstream's, once it knows
	waitZoneHeld(t, s, 2)
	for _, c := range []<-chan *dns.Msg{udp, tcp, ptr} {
		select {
		case r := <-c:
			t.Fatalf("answered before the zone listed: %v", r)
		default:
		}
	}
	close(ready)
	for i, c := range []<-chan *dns.Msg{udp, tcp} {
		if r := <-c; r == nil || r.Rcode != dns.RcodeNameError {
			t.Errorf("held query %d after the list: got %v, want the zone's NXDOMAIN", i, r)
		}
	}
	if r := <-ptr; r == nil || r.Rcode != dns.RcodeSuccess {
		t.Errorf("held reverse name after the list: got %v, want upstream's answer", r)
	}
	if s.zoneHold.Load() != nil {
		t.Errorf("zone hold still on after the list")
	}
}

// A server that stops while the zone has not listed answers what it held.
func TestHoldZoneEndsOnShutdown(t *testing.T) {
	s, addr := startServer(t, Config{}, &fakeZone{}, &fakeResolver{})
	s.HoldZone(make(chan struct{}))
	reply := exchangeAsync(addr.String(), "udp", "new.default.svc.cluster.local.")
	waitZoneHeld(t, s, 1)
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := <-reply; r == nil || r.Rcode != dns.RcodeNameError {
		t.Errorf("held query at shutdown: got %v, want the zone's answer", r)
	}
}
