package upstream

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// TestLentReplyOutlivesNextQuery checks that a UDP reply lent its read
// buffer keeps it until released: queries after it, on the same socket and
// the same buffer pool, do not write over it, and Release gives the buffer
// back.
func TestLentReplyOutlivesNextQuery(t *testing.T) {
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		ip := "192.0.2.1"
		if r.Question[0].Name == "second.example." {
			ip = "192.0.2.2"
		}
		_ = w.WriteMsg(replyA(r, ip))
	})
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})
	first, err := wire.NewKey("first.example.", dns.TypeA, dns.ClassINET, false, false)
	if err != nil {
		t.Fatal(err)
	}
	second, err := wire.NewKey("second.example.", dns.TypeA, dns.ClassINET, false, false)
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := f.Exchange(context.Background(), first, time.Time{})
	if err != nil {
		t.Fatalf("Exchange(first): %v", err)
	}
	for range 4 { // read into pooled buffers while r holds its own
		r2, _, err := f.Exchange(context.Background(), second, time.Time{})
		if err != nil {
			t.Fatalf("Exchange(second): %v", err)
		}
		r2.Release()
	}
	m := new(dns.Msg)
	if err := m.Unpack(r.Raw); err != nil {
		t.Fatalf("unpacking the first reply after later queries: %v", err)
	}
	if len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "192.0.2.1" || !strings.EqualFold(m.Question[0].Name, "first.example.") {
		t.Fatalf("first reply after later queries: got %v, want first.example. A 192.0.2.1", m)
	}
	r.Release()
	if r.Raw != nil || r.Scanned {
		t.Errorf("after Release: got Raw %d bytes, Scanned %t; want a zero reply", len(r.Raw), r.Scanned)
	}
}

// TestLentRepliesUnderHostileTraffic runs queries from several goroutines
// on one forwarder whose server sends, by name, a spoofed datagram before
// the answer, a truncated UDP reply (the answer then over TCP), REFUSED,
// an answer spelled out (unpacked, not scanned) or a plain one; each
// goroutine holds its last few replies unreleased while it asks more:
// every held reply must still read as its own name's answer when released,
// so no path gives a buffer back to the pool while a reply is lent it.
func TestLentRepliesUnderHostileTraffic(t *testing.T) {
	ipOf := func(name string) string { // n<g>-<i>-<kind>.example. -> 10.0.g.i
		var g, i int
		var kind string
		if _, err := fmt.Sscanf(strings.TrimSuffix(name, ".example."), "n%d-%d-%s", &g, &i, &kind); err != nil {
			return "192.0.2.99"
		}
		return fmt.Sprintf("10.%d.%d.%d", g, i/256, i%256)
	}
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		name := r.Question[0].Name
		m := replyA(r, ipOf(name))
		switch {
		case strings.HasSuffix(name, "-spoof.example."):
			spoof := replyA(r, "192.0.2.66")
			spoof.Id++
			_ = w.WriteMsg(spoof)
		case strings.HasSuffix(name, "-trunc.example.") && w.LocalAddr().Network() != "tcp":
			m = new(dns.Msg)
			m.SetReply(r)
			m.Truncated = true
		case strings.HasSuffix(name, "-refused.example."):
			m = new(dns.Msg)
			m.SetRcode(r, dns.RcodeRefused)
		case strings.HasSuffix(name, "-spelled.example."):
			m.Compress = false
		}
		_ = w.WriteMsg(m)
	})
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})
	kinds := []string{"plain", "spoof", "trunc", "refused", "spelled"}
	type held struct {
		name string
		r    wire.UpstreamReply
	}
	check := func(h held) error {
		m := new(dns.Msg)
		if err := m.Unpack(h.r.Raw); err != nil {
			return fmt.Errorf("%s: unpacking the held reply: %w", h.name, err)
		}
		if len(m.Question) != 1 || !strings.EqualFold(m.Question[0].Name, h.name) {
			return fmt.Errorf("%s: held reply now asks %v", h.name, m.Question)
		}
		if strings.HasSuffix(h.name, "-refused.example.") {
			if m.Rcode != dns.RcodeRefused {
				return fmt.Errorf("%s: held reply now has rcode %d", h.name, m.Rcode)
			}
			return nil
		}
		if len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != ipOf(h.name) {
			return fmt.Errorf("%s: held reply now answers %v, want %s", h.name, m.Answer, ipOf(h.name))
		}
		return nil
	}
	const goroutines, each, keep = 6, 150, 3
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ring []held
			for i := range each {
				name := fmt.Sprintf("n%d-%d-%s.example.", g, i, kinds[(g+i)%len(kinds)])
				key, err := wire.NewKey(name, dns.TypeA, dns.ClassINET, false, false)
				if err != nil {
					errs <- err
					return
				}
				r, _, err := f.Exchange(context.Background(), key, time.Time{})
				if err != nil {
					errs <- fmt.Errorf("Exchange(%s): %w", name, err)
					return
				}
				ring = append(ring, held{name, r})
				if len(ring) > keep {
					if err := check(ring[0]); err != nil {
						errs <- err
						return
					}
					ring[0].r.Release()
					ring = ring[1:]
				}
			}
			for _, h := range ring {
				if err := check(h); err != nil {
					errs <- err
					return
				}
				h.r.Release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
