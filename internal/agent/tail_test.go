package agent

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/pkg/server"
	"github.com/nodecache/nodecache/pkg/wire"
)

func parsedQuery(tb testing.TB, name string) *wire.Query {
	tb.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	pkt, err := m.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	q := new(wire.Query)
	if err := wire.Parse(pkt, q); err != nil {
		tb.Fatal(err)
	}
	return q
}

// TestTailSlowReaderLosesLines checks that a subscriber that does not read
// loses what does not fit its queue, counted, and never blocks Observe.
func TestTailSlowReaderLosesLines(t *testing.T) {
	h := newTailHub()
	q := parsedQuery(t, "www.example.org.")
	client := netip.MustParseAddr("10.0.0.1")
	h.Observe(client, q, server.Result{}, time.Millisecond) // nobody tails: nothing kept
	sub := h.subscribe()
	for range tailBuffer + 10 {
		h.Observe(client, q, server.Result{Rcode: dns.RcodeNameError, Source: wire.SourceCache}, time.Millisecond)
	}
	if got := sub.dropped.Load(); got != 10 {
		t.Errorf("lost lines: got %d, want 10", got)
	}
	if got := len(sub.ch); got != tailBuffer {
		t.Errorf("queued: got %d, want %d", got, tailBuffer)
	}
	ev := <-sub.ch
	if name := string(ev.name[:ev.nameLen]); name != "\x03www\x07example\x03org\x00" || ev.rcode != dns.RcodeNameError {
		t.Errorf("event: got %q rcode %d, want www.example.org. NXDOMAIN", name, ev.rcode)
	}
	h.unsubscribe(sub)
	if h.n.Load() != 0 {
		t.Errorf("subscribers after unsubscribe: got %d, want 0", h.n.Load())
	}
}

func TestTailFilter(t *testing.T) {
	line := adminapi.TailLine{Pod: "demo/web-1", Name: "www.example.org.", Rcode: "NXDOMAIN", Micros: 2000}
	for _, tt := range []struct {
		f    tailFilter
		want bool
	}{
		{tailFilter{rcode: -1}, true},
		{tailFilter{rcode: dns.RcodeNameError}, true},
		{tailFilter{rcode: dns.RcodeServerFailure}, false},
		{tailFilter{rcode: -1, pod: "web-1"}, true},
		{tailFilter{rcode: -1, pod: "demo/web-1"}, true},
		{tailFilter{rcode: -1, pod: "other/web-1"}, false},
		{tailFilter{rcode: -1, namespace: "demo"}, true},
		{tailFilter{rcode: -1, namespace: "kube-system"}, false},
		{tailFilter{rcode: -1, suffix: "example.org."}, true},
		{tailFilter{rcode: -1, suffix: "ample.org."}, false},
		{tailFilter{rcode: -1, minLatency: 2 * time.Millisecond}, true},
		{tailFilter{rcode: -1, minLatency: 3 * time.Millisecond}, false},
	} {
		if got := tt.f.match(&line); got != tt.want {
			t.Errorf("%+v: got %v, want %v", tt.f, got, tt.want)
		}
	}
}

// BenchmarkObserveIdleTail measures what an answered query costs the
// agent's observers with nobody tailing: the per-client counts alone
// (before tail existed) and with the idle tail hub beside them.
func BenchmarkObserveIdleTail(b *testing.B) {
	q := parsedQuery(b, "www.example.org.")
	client := netip.MustParseAddr("10.0.0.1")
	res := server.Result{Source: wire.SourceCache}
	b.Run("clients", func(b *testing.B) {
		o := newClientStats(4096)
		b.ReportAllocs()
		for b.Loop() {
			o.Count(client, res, 1, time.Microsecond)
		}
	})
	b.Run("clients+tail", func(b *testing.B) {
		c, o := newClientStats(4096), observers{newTailHub()}
		b.ReportAllocs()
		for b.Loop() {
			c.Count(client, res, 1, time.Microsecond)
			if !o.Idle() { // as the server asks an IdleObserver
				o.Observe(client, q, res, time.Microsecond)
			}
		}
	})
}

// TestObserversIdle: the fan-out is idle only while every observer is: the
// tail with no subscriber is, the query log never is.
func TestObserversIdle(t *testing.T) {
	h := newTailHub()
	if !(observers{h}).Idle() {
		t.Error("tail alone, nobody tailing: got busy, want idle")
	}
	sub := h.subscribe()
	if (observers{h}).Idle() {
		t.Error("tail alone, one subscriber: got idle, want busy")
	}
	h.unsubscribe(sub)
	if (observers{h, &queryLog{}}).Idle() {
		t.Error("tail and query log: got idle, want busy (the query log is never idle)")
	}
}
