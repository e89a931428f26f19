package server

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/nodecache/nodecache/pkg/wire"
)

// TestTallySameTotals accounts one mixed batch of answered queries twice:
// one at a time, as TCP and the slow path do, and through a tally, as the
// batched UDP loop does. Every series of both registries must read the
// same, histograms' buckets, counts and sums included.
func TestTallySameTotals(t *testing.T) {
	cfg := Config{Addrs: []netip.AddrPort{netip.MustParseAddrPort("169.254.20.10:53"), netip.MustParseAddrPort("10.0.0.10:53")},
		Domain: "cluster.local.", StubDomains: []string{"corp.example."}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	one, tallied := prometheus.NewRegistry(), prometheus.NewRegistry()
	m1, err := newMetrics(one, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := newMetrics(tallied, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	v4, v6 := netip.MustParseAddr("10.1.0.7"), netip.MustParseAddr("fd00::7")
	a := parseName(t, "www.example.org.")
	zone := parseName(t, "web.default.svc.cluster.local.")
	stub := parseName(t, "db.corp.example.")
	do := parseName(t, "www.example.org.")
	do.DO = true
	aaaa := parseName(t, "www.example.org.")
	aaaa.Type = dns.TypeAAAA
	positive := make([]byte, 60)
	positive[7] = 1
	empty := make([]byte, 40)
	type query struct {
		ep     edge
		client netip.Addr
		q      *wire.Query
		res    Result
		reqLen int
		reply  []byte
	}
	batch := []query{
		{edge{}, v4, a, Result{Source: wire.SourceCache}, 40, positive},
		{edge{}, v4, a, Result{Source: wire.SourceCache}, 40, positive},
		{edge{}, v6, a, Result{Source: wire.SourceCache}, 40, positive},
		{edge{server: 1}, v4, a, Result{Source: wire.SourceCache}, 40, positive},
		{edge{}, v4, zone, Result{Source: wire.SourceZone}, 60, positive},
		{edge{}, v4, zone, Result{Rcode: dns.RcodeNameError, Source: wire.SourceZone}, 60, empty},
		{edge{}, v4, stub, Result{Source: wire.SourceUpstream}, 50, positive},
		{edge{}, v4, do, Result{Source: wire.SourceStale}, 51, positive},
		{edge{}, v4, aaaa, Result{Source: wire.SourceCache}, 40, empty},
		{edge{}, v4, a, Result{Rcode: dns.RcodeRefused, Source: wire.SourceLocal}, 40, empty},
		{edge{}, v4, a, Result{Rcode: 99, Source: wire.NumSources + 3}, 4000, positive},
		{edge{}, v4, a, Result{Source: wire.SourceCache}, 40, positive},
	}
	const took = 420 * time.Microsecond
	seconds := took.Seconds()
	var tl tally
	c1, c2 := countsByClient{}, countsByClient{}
	for round := 0; round < 3; round++ {
		for _, x := range batch {
			m1.observe(int(x.ep.proto), x.q.Type, x.res, seconds)
			m1.coredns.observe(x.ep, x.client, x.q, x.res, seconds, x.reqLen, x.reply)
			c1.Count(x.client, x.res, 1, took)
			tl.add(m2.recordKeyOf(x.ep, x.client, x.q, x.res, x.reqLen, x.reply))
			tl.count(x.client, x.res)
		}
		if len(tl.groups) >= len(batch) || len(tl.clients) >= len(batch) {
			t.Fatalf("%d and %d groups for %d queries: alike queries were not grouped", len(tl.groups), len(tl.clients), len(batch))
		}
		tl.flush(m2, c2, took)
		if !maps.Equal(c1, c2) {
			t.Fatalf("round %d: tallied client counts %v, want %v", round, c2, c1)
		}
		if got, want := exposition(t, tallied), exposition(t, one); !sameExposition(got, want) {
			t.Fatalf("round %d: tallied series differ from one-at-a-time ones:\n%s\nwant:\n%s", round, got, want)
		}
	}
}

// countsByClient is a Counter that keeps, by client and result, the time
// summed (under n 0) and the count (under n 1).
type countsByClient map[clientGroup]time.Duration

func (c countsByClient) Count(client netip.Addr, res Result, n uint64, took time.Duration) {
	c[clientGroup{client: client, res: res}] += took
	c[clientGroup{client: client, res: res, n: 1}] += time.Duration(n)
}

// TestHistVecMatchesPrometheus: n observations of a value added at once
// read as prometheus' own histogram does after n Observe calls.
func TestHistVecMatchesPrometheus(t *testing.T) {
	opts := prometheus.HistogramOpts{Name: "h_seconds", Help: "h.", Buckets: []float64{0.001, 0.01, 0.1}}
	want, got := prometheus.NewRegistry(), prometheus.NewRegistry()
	ref := prometheus.NewHistogramVec(opts, []string{"k"})
	want.MustRegister(ref)
	h, err := newHistVec(prometheus.NewHistogramVec(opts, []string{"k"}), 3, func(i int) []string { return []string{string(rune('a' + i))} })
	if err != nil {
		t.Fatal(err)
	}
	got.MustRegister(h)
	for _, o := range []struct {
		cell int
		v    float64
		n    uint64
	}{{0, 0.0005, 3}, {0, 0.001, 1}, {0, 0.05, 2}, {2, 7, 4}, {2, 0.01, 1}} {
		h.observeN(o.cell, o.v, o.n)
		for range o.n {
			ref.WithLabelValues(string(rune('a' + o.cell))).Observe(o.v)
		}
	}
	if g, w := exposition(t, got), exposition(t, want); !sameExposition(g, w) {
		t.Errorf("histVec:\n%s\nwant:\n%s", g, w)
	}
}

func exposition(t *testing.T, g prometheus.Gatherer) string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, mf := range mfs {
		b := new(bytesBuffer)
		if _, err := expfmt.MetricFamilyToText(b, mf); err != nil {
			t.Fatal(err)
		}
		out = append(out, b.b...)
	}
	return string(out)
}

// sameExposition compares two text expositions line by line: equal, but
// for histogram sums, which may differ in the last bits (n·v added at once
// against v added n times) and must agree to 1e-12 relative.
func sameExposition(a, b string) bool {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(al) != len(bl) {
		return false
	}
	for i := range al {
		if al[i] == bl[i] {
			continue
		}
		an, av, aok := strings.Cut(al[i], " ")
		bn, bv, bok := strings.Cut(bl[i], " ")
		if !aok || !bok || an != bn || !strings.Contains(an, "_sum") {
			return false
		}
		x, err1 := strconv.ParseFloat(av, 64)
		y, err2 := strconv.ParseFloat(bv, 64)
		if err1 != nil || err2 != nil || math.Abs(x-y) > 1e-12*math.Max(math.Abs(x), math.Abs(y)) {
			return false
		}
	}
	return true
}

type counterFunc func(client netip.Addr, res Result, n uint64, took time.Duration)

func (f counterFunc) Count(client netip.Addr, res Result, n uint64, took time.Duration) {
	f(client, res, n, took)
}

type bytesBuffer struct{ b []byte }

func (w *bytesBuffer) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

// TestBatchedLoopCountsEveryQuery sends bursts of queries over a real UDP
// socket, so that the read loop serves them in batches (recvmmsg), and
// checks that every answered query is counted once in the request,
// response and histogram series.
func TestBatchedLoopCountsEveryQuery(t *testing.T) {
	reg := prometheus.NewRegistry()
	counts := countsByClient{}
	var mu sync.Mutex
	counter := counterFunc(func(client netip.Addr, res Result, n uint64, took time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		counts.Count(client, res, n, took)
	})
	_, addr := startServerReg(t, netip.MustParseAddr("127.0.0.1"), 1, Config{}, Deps{Resolver: &fakeResolver{}, Counter: counter}, reg, nil)
	c, err := net.Dial("udp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const bursts, per = 20, 25
	buf := make([]byte, 4096)
	answered := 0
	for i := 0; i < bursts; i++ {
		for j := 0; j < per; j++ {
			m := new(dns.Msg)
			m.SetQuestion(fmt.Sprintf("n%d.example.org.", j%3), dns.TypeA)
			m.Id = uint16(i*per + j)
			pkt, _ := m.Pack()
			if _, err := c.Write(pkt); err != nil {
				t.Fatal(err)
			}
		}
		for j := 0; j < per; j++ {
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(buf); err != nil {
				t.Fatalf("burst %d: %d of %d replies: %v", i, j, per, err)
			}
			answered++
		}
	}
	mu.Lock()
	var n time.Duration
	for k, v := range counts {
		if k.n == 1 && k.client == netip.MustParseAddr("127.0.0.1") {
			n += v
		}
	}
	mu.Unlock()
	if n != time.Duration(answered) {
		t.Errorf("the Counter counted %d queries from the client, want %d", n, answered)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			sums[mf.GetName()] += v
		}
	}
	for _, name := range []string{"nodecache_server_requests_total", "nodecache_server_responses_total",
		"nodecache_server_request_duration_seconds", "coredns_dns_requests_total", "coredns_dns_responses_total",
		"coredns_dns_request_duration_seconds", "coredns_dns_request_size_bytes", "coredns_dns_response_size_bytes",
		"coredns_cache_requests_total"} {
		if got := sums[name]; got != float64(answered) {
			t.Errorf("%s: %v, want %d (every answered query once)", name, got, answered)
		}
	}
}

// BenchmarkServeDatagramHitBatch is BenchmarkServeDatagramHit as the
// batched loop serves it: the accounting tallied and added once per batch
// of batchSize queries.
func BenchmarkServeDatagramHitBatch(b *testing.B) {
	f := &fakeResolver{}
	s, err := New(Config{Addrs: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}}, Deps{Resolver: f},
		prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	m := new(dns.Msg)
	m.SetQuestion("www.example.org.", dns.TypeA)
	m.SetEdns0(1232, false)
	pkt, _ := m.Pack()
	key, _ := wire.KeyOf(m)
	if _, err := f.Resolve(context.Background(), key, time.Now().Add(time.Minute)); err != nil {
		b.Fatal(err)
	}
	client := netip.MustParseAddrPort("10.0.0.1:5353")
	var q wire.Query
	var t tally
	rq := &discardQueue{out: make([]byte, 0, 4096)}
	start := time.Now()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		s.serveDatagram(nil, pkt, client, &q, start, rq, &t)
		if i++; i == 32 {
			t.flush(s.metrics, nil, time.Since(start))
			i, start = 0, time.Now()
		}
	}
}

// idleObserver counts what it is shown; idle says whether it has anyone to
// tell.
type idleObserver struct {
	idle  atomic.Bool
	seen  atomic.Int64
	asked atomic.Int64 // calls of Idle
}

func (o *idleObserver) Idle() bool { o.asked.Add(1); return o.idle.Load() }

func (o *idleObserver) Observe(netip.Addr, *wire.Query, Result, time.Duration) { o.seen.Add(1) }

// TestIdleObserverSkipped: through the batched loop an IdleObserver sees
// every answered query while it is busy and none while it is idle.
func TestIdleObserverSkipped(t *testing.T) {
	obs := &idleObserver{}
	_, addr := startServerReg(t, netip.MustParseAddr("127.0.0.1"), 1, Config{}, Deps{Resolver: &fakeResolver{}, Observer: obs},
		prometheus.NewRegistry(), nil)
	burst := observedBurst(t, addr)
	// Bursts smaller than a batch: the replies leave after their queries
	// are observed (a full batch is sent before its last query is).
	obs.idle.Store(true)
	burst(20)
	if got := obs.seen.Load(); got != 0 {
		t.Errorf("idle: observed %d queries, want 0", got)
	}
	obs.idle.Store(false)
	burst(20)
	burst(20)
	if got := obs.seen.Load(); got != 40 {
		t.Errorf("busy: observed %d queries, want 40", got)
	}
}

// TestIdleAskedOncePerBatch: a query recorded into a batch's tally is
// shown to the Observer as the batch's observe says, without asking Idle
// again; one recorded alone asks it each time.
func TestIdleAskedOncePerBatch(t *testing.T) {
	obs := &idleObserver{}
	s, err := New(Config{Addrs: []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}}, Deps{Resolver: &fakeResolver{}, Observer: obs},
		prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	q := parseName(t, "www.example.org.")
	client := netip.MustParseAddrPort("10.0.0.1:5353")
	reply := make([]byte, 40)
	res := Result{Source: wire.SourceCache}
	for _, observe := range []bool{true, false} {
		obs.seen.Store(0)
		obs.asked.Store(0)
		tl := tally{observe: observe}
		for range 5 {
			s.record(&tl, edge{}, client, q, res, time.Now(), make([]byte, 30), reply)
		}
		want := int64(0)
		if observe {
			want = 5
		}
		if got := obs.seen.Load(); got != want {
			t.Errorf("batch with observe %v: observed %d of 5 queries, want %d", observe, got, want)
		}
		if got := obs.asked.Load(); got != 0 {
			t.Errorf("batch with observe %v: Idle asked %d times, want 0 (the loop asks once a batch)", observe, got)
		}
	}
	obs.asked.Store(0)
	for range 3 {
		s.record(nil, edge{}, client, q, res, time.Now(), make([]byte, 30), reply)
	}
	if got := obs.asked.Load(); got != 3 {
		t.Errorf("one query at a time: Idle asked %d times for 3, want 3", got)
	}
}

// observedBurst returns a function that sends n queries for names the
// fakeResolver answers to addr and waits for the n replies.
func observedBurst(t *testing.T, addr netip.AddrPort) func(n int) {
	c, err := net.Dial("udp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return func(n int) {
		buf := make([]byte, 4096)
		for j := 0; j < n; j++ {
			m := new(dns.Msg)
			m.SetQuestion(fmt.Sprintf("n%d.example.org.", j%3), dns.TypeA)
			pkt, _ := m.Pack()
			if _, err := c.Write(pkt); err != nil {
				t.Fatal(err)
			}
		}
		for j := 0; j < n; j++ {
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(buf); err != nil {
				t.Fatalf("%d of %d replies: %v", j, n, err)
			}
		}
	}
}

// plainObserver is an Observer that is not an IdleObserver.
type plainObserver struct{ seen atomic.Int64 }

func (o *plainObserver) Observe(netip.Addr, *wire.Query, Result, time.Duration) { o.seen.Add(1) }

// TestPlainObserverSeesAll: an Observer that cannot say it is idle is
// shown every answered query.
func TestPlainObserverSeesAll(t *testing.T) {
	obs := &plainObserver{}
	_, addr := startServerReg(t, netip.MustParseAddr("127.0.0.1"), 1, Config{}, Deps{Resolver: &fakeResolver{}, Observer: obs},
		prometheus.NewRegistry(), nil)
	burst := observedBurst(t, addr)
	// The first burst has the misses, which a slow-path worker records
	// after their replies are sent; the next two are hits, recorded by the
	// batched loop before its (sub-batch) flush.
	burst(20)
	burst(20)
	burst(20)
	if got := obs.seen.Load(); got < 40 || got > 60 {
		t.Errorf("observed %d queries, want the 40 hits of the last two bursts and up to the 20 of the first", got)
	}
}
