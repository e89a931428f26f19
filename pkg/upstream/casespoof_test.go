package upstream

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// swapCase returns name with the case of every letter flipped: a spelling
// that never matches the one sent, as a blind forger's guess would not.
func swapCase(name string) string {
	b := []byte(name)
	for i, c := range b {
		if l := c | 0x20; l >= 'a' && l <= 'z' {
			b[i] = c ^ 0x20
		}
	}
	return string(b)
}

// forge writes n forged replies to r carrying ip, each with the right ID
// and question but the question name in the wrong case.
func forge(w dns.ResponseWriter, r *dns.Msg, n int64, ip string) {
	for range n {
		m := replyA(r, ip)
		m.Question[0].Name = swapCase(w.(caseEcho).sent)
		b, _ := m.Pack()
		_, _ = w.Write(b) // Write bypasses the echo
	}
}

// learnEcho runs queries until f has learned that its one server echoes
// case (a query whose letters all come out lowercase proves nothing).
func learnEcho(tb testing.TB, f *Forwarder) {
	tb.Helper()
	for i := 0; i < 50 && !echoing(f); i++ {
		exchangeA(tb, f, "learn.example.org.")
	}
	if !echoing(f) {
		tb.Fatal("server that echoes case: got not learned")
	}
}

// TestCaseForgeriesAtEveryCount has a server known to echo case answer
// each query with k forged replies (right ID and question, wrong case, a
// wrong address) before the genuine one, for every k from 0 to well past
// the count at which the server would count as no longer echoing: the
// genuine answer is taken every time, so the case adds a bit per letter
// however many forgeries arrive.
func TestCaseForgeriesAtEveryCount(t *testing.T) {
	var forged atomic.Int64
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		forge(w, r, forged.Load(), "203.0.113.66")
		answerA("192.0.2.1")(w, r)
	})
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})
	learnEcho(t, f)
	const most = 3 * caseStopQueries
	for k := int64(0); k <= most; k++ {
		forged.Store(k)
		if got, _ := exchangeA(t, f, "www.example.org."); got != "192.0.2.1" {
			t.Fatalf("%d forged replies before the genuine one: got %s, want 192.0.2.1", k, got)
		}
	}
	if !echoing(f) {
		t.Error("after the forgeries: server no longer counted as echoing case")
	}
	if got, want := counterValue(t, f, "errors", ts.addr.String(), kindSpoofed), float64(most*(most+1)/2); got != want {
		t.Errorf("spoofed replies counted: got %v, want %v (one per forged datagram)", got, want)
	}
}

// TestCaseStopNeedsDistinctQueries has a server known to echo case start
// lowercasing: no mismatching reply is taken until caseStopQueries distinct
// queries in a row got only such replies, however many each got.
func TestCaseStopNeedsDistinctQueries(t *testing.T) {
	var lowercase atomic.Bool
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		if lowercase.Load() {
			forge(w, r, 3, "192.0.2.1") // three mismatching replies to one query
			return
		}
		answerA("192.0.2.1")(w, r)
	})
	cfg := testConfig(ts)
	cfg.TryTimeout, cfg.Deadline = 100*time.Millisecond, 100*time.Millisecond
	f, _ := newTestForwarder(t, cfg, hooks{})
	learnEcho(t, f)
	lowercase.Store(true)
	for i := 1; i <= caseStopQueries+2; i++ {
		_, _, err := exchange(context.Background(), f, query("www.example.org.", dns.TypeA))
		if failed := err != nil; failed != (i <= caseStopQueries) {
			t.Errorf("query %d after the server stopped echoing: got error %v, want one for the first %d", i, err, caseStopQueries)
		}
	}
	if echoing(f) {
		t.Error("server that stopped echoing: still counted as echoing")
	}
}

// echoing reports whether f's first server counts as echoing case.
func echoing(f *Forwarder) bool { return f.all[0].cases.echoing() }

// fakeClock is a clock tests move by hand.
type fakeClock struct{ t atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.t.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.t.Add(int64(d)) }
func newFakeClock() *fakeClock               { c := &fakeClock{}; c.t.Store(time.Unix(1e9, 0).UnixNano()); return c }

// TestCaseStopAndRetest checks, by an injected clock, that a server
// concluded to have stopped echoing is re-tested every caseRetest: until
// then a reply in the case sent does not turn the check back on; after it,
// one in another case leaves it off for another caseRetest and one in the
// case sent turns it on, so that forgeries are refused again.
func TestCaseStopAndRetest(t *testing.T) {
	var lowercase atomic.Bool
	var forged atomic.Int64
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		if lowercase.Load() {
			forge(w, r, 1, "192.0.2.1")
			return
		}
		forge(w, r, forged.Load(), "203.0.113.66")
		answerA("192.0.2.1")(w, r)
	})
	cfg := testConfig(ts)
	cfg.TryTimeout, cfg.Deadline = 100*time.Millisecond, 100*time.Millisecond
	clock := newFakeClock()
	f, _ := newTestForwarder(t, cfg, hooks{now: clock.now})
	learnEcho(t, f)
	lowercase.Store(true)
	for range caseStopQueries {
		_, _, _ = exchange(context.Background(), f, query("www.example.org.", dns.TypeA))
	}
	if echoing(f) {
		t.Fatalf("after %d queries answered only in another case: still counted as echoing", caseStopQueries)
	}
	steps := []struct {
		advance   time.Duration
		lowercase bool
		want      bool // counted as echoing after the step's queries
	}{
		{caseRetest - time.Second, false, false}, // echoes again, not yet re-tested
		{time.Second, true, false},               // re-tested: still lowercases
		{caseRetest - time.Second, false, false}, // the re-test restarted the wait
		{time.Second, false, true},               // re-tested: echoes
	}
	for i, st := range steps {
		clock.advance(st.advance)
		lowercase.Store(st.lowercase)
		for range 4 { // enough for one query sent in mixed case, but for 2^-52
			exchangeA(t, f, "www.example.org.")
		}
		if got := echoing(f); got != st.want {
			t.Fatalf("step %d: counted as echoing %t, want %t", i, got, st.want)
		}
	}
	forged.Store(2)
	if got, _ := exchangeA(t, f, "www.example.org."); got != "192.0.2.1" {
		t.Errorf("after the re-test: got %s, want 192.0.2.1 (the forgeries refused)", got)
	}
}
