package server

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// heldCount is how many queries the hold keeps now.
func (s *Server) heldCount() int { return countHeld(s.hold.Load()) }

// countHeld is how many queries h keeps now; 0 for a nil h.
func countHeld(h *missHold) int {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// While a restore imports, a UDP query that misses the cache waits for it
// and is then answered from what it brought, not upstream; one it did not
// bring goes upstream then; the zone's names are answered at once.
func TestHoldMissesUntilRestore(t *testing.T) {
	f := &fakeResolver{}
	s, addr := startServer(t, Config{}, &fakeZone{}, f)
	done := make(chan struct{})
	s.HoldMisses(done, time.Minute)

	// exchange fails the test on a timeout: the zone's answer is not held.
	if r := exchange(t, addr.String(), "svc.ns.svc.cluster.local.", dns.TypeA); r.Rcode != dns.RcodeNameError {
		t.Fatalf("zone name during the hold: got %s, want the zone's NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
	replies := make(chan *dns.Msg, 2)
	for _, name := range []string{"restored.example.", "new.example."} {
		go func() {
			m := new(dns.Msg).SetQuestion(name, dns.TypeA)
			r, _, err := (&dns.Client{Timeout: 30 * time.Second}).Exchange(m, addr.String())
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			replies <- r
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); s.heldCount() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("held queries: %d, want the 2 misses held", s.heldCount())
		}
	}
	if n := f.calls.Load(); n != 0 {
		t.Fatalf("upstream asked %d times during the hold, want 0", n)
	}
	// What the import brings: one of the two names.
	m := new(dns.Msg).SetQuestion("restored.example.", dns.TypeA)
	m.Response = true
	m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "restored.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
		A: net.IPv4(198, 51, 100, 7)}}
	p, err := wire.Pack(m)
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, wire.MaxNameLen)
	n, err := dns.PackDomainName("restored.example.", key, 0, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.cached = map[string]*wire.Packed{string(key[:n]): p} // the fake's lookup is by wire name
	f.mu.Unlock()
	close(done)
	got := map[string]string{}
	for range 2 {
		r := <-replies
		if r == nil || len(r.Answer) != 1 {
			t.Fatalf("reply after the hold: %v", r)
		}
		got[r.Question[0].Name] = r.Answer[0].(*dns.A).A.String()
	}
	if got["restored.example."] != "198.51.100.7" || got["new.example."] != "192.0.2.1" {
		t.Errorf("answers after the hold: got %v, want restored.example. from the restored cache, new.example. from upstream", got)
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("upstream asked %d times, want once (new.example. only)", n)
	}
	if s.hold.Load() != nil {
		t.Errorf("hold still on after the restore ended")
	}
}

// A server that stops during a hold answers what it held.
func TestHoldMissesEndsOnShutdown(t *testing.T) {
	f := &fakeResolver{}
	s, addr := startServer(t, Config{}, &fakeZone{}, f)
	s.HoldMisses(make(chan struct{}), time.Hour)
	reply := make(chan *dns.Msg, 1)
	go func() {
		m := new(dns.Msg).SetQuestion("held.example.", dns.TypeA)
		r, _, _ := (&dns.Client{Timeout: 30 * time.Second}).Exchange(m, addr.String())
		reply <- r
	}()
	for deadline := time.Now().Add(10 * time.Second); s.heldCount() < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the miss was not held")
		}
	}
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := <-reply; r == nil || r.Rcode != dns.RcodeSuccess {
		t.Errorf("held query at shutdown: got %v, want its answer", r)
	}
}
