package upstream

import (
	"context"
	"strings"
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
