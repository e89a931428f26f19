package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/netip"
	"strings"
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

// TestTailAgainstTheAgent runs `nodecache tail` against an agent and checks
// the lines it prints for real queries, with a filter and as JSON.
func TestTailAgainstTheAgent(t *testing.T) {
	a := startCLIAgent(t)
	lines := func(t *testing.T, args ...string) (<-chan string, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- cmdTail(ctx, pw, append(args, "--admin-socket", a.socket))
			_ = pw.Close()
		}()
		ch := make(chan string, 64)
		go func() {
			defer close(ch)
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				ch <- sc.Text()
			}
		}()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("tail: got %v, want nil after Ctrl-C", err)
			}
		})
		return ch, cancel
	}
	// next sends name until a line arrives (the first ones may go before
	// the stream is open), bounded only against a hang.
	next := func(t *testing.T, ch <-chan string, name string) string {
		t.Helper()
		for range 100 {
			ask(t, a.dns, name, dns.TypeA)
			select {
			case l := <-ch:
				return l
			case <-time.After(100 * time.Millisecond):
			}
		}
		t.Fatalf("no tail line for %s", name)
		return ""
	}

	t.Run("text", func(t *testing.T) {
		ch, _ := lines(t)
		l := next(t, ch, "www.example.org.")
		for _, want := range []string{"127.0.0.1 www.example.org. A NOERROR"} {
			if !strings.Contains(l, want) {
				t.Errorf("line %q lacks %q", l, want)
			}
		}
	})
	t.Run("rcode filter, json", func(t *testing.T) {
		ch, _ := lines(t, "--rcode", "NXDOMAIN", "-o", "json")
		ask(t, a.dns, "web.demo.svc.cluster.local.", dns.TypeA) // NOERROR: filtered out
		var l adminapi.TailLine
		if err := json.Unmarshal([]byte(next(t, ch, "nx.example.org.")), &l); err != nil {
			t.Fatal(err)
		}
		if l.Name != "nx.example.org." || l.Rcode != "NXDOMAIN" || l.Type != "A" || l.Client != "127.0.0.1" {
			t.Errorf("line: got %+v, want nx.example.org. A NXDOMAIN from 127.0.0.1", l)
		}
		if l.Source != "cache" && l.Source != "upstream" {
			t.Errorf("source: got %q, want cache or upstream", l.Source)
		}
	})
	t.Run("upstream used", func(t *testing.T) {
		ch, _ := lines(t, "--suffix", "example.net", "-o", "json")
		for i := 0; ; i++ {
			var l adminapi.TailLine
			// A new name each time: a miss, answered by the upstream.
			if err := json.Unmarshal([]byte(next(t, ch, "n"+strings.Repeat("x", i)+".example.net.")), &l); err != nil {
				t.Fatal(err)
			}
			if l.Source == "upstream" {
				if l.Upstream != a.up.addr.String() {
					t.Errorf("upstream: got %q, want %s", l.Upstream, a.up.addr)
				}
				return
			}
			if i > 5 {
				t.Fatalf("no upstream answer among the lines: last %+v", l)
			}
		}
	})
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
			o.Observe(client, q, res, time.Microsecond)
		}
	})
	b.Run("clients+tail", func(b *testing.B) {
		o := observers{newClientStats(4096), newTailHub()}
		b.ReportAllocs()
		for b.Loop() {
			o.Observe(client, q, res, time.Microsecond)
		}
	})
}
