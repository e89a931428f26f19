package upstream

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestQueryCaseRandomised checks that UDP queries go out with their
// letters in random case, and that a server echoing it is learned.
func TestQueryCaseRandomised(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		mu.Lock()
		seen[w.(caseEcho).sent] = true
		mu.Unlock()
		answerA("192.0.2.1")(w, r)
	})
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})
	const n = 20
	for i := 0; i < n; i++ {
		if got, _ := exchangeA(t, f, "www.example.org."); got != "192.0.2.1" {
			t.Fatalf("answer: got %s, want 192.0.2.1", got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for name := range seen {
		if !strings.EqualFold(name, "www.example.org.") {
			t.Errorf("sent %q, want www.example.org. in some case", name)
		}
	}
	// 13 letters: 20 queries all in one spelling has odds of 2^-247.
	if len(seen) < 2 {
		t.Errorf("spellings sent in %d queries: got %v, want random case", n, seen)
	}
	if !f.all[0].echoesCase.Load() {
		t.Error("server that echoes case: got not learned")
	}
}

// TestCaseMismatchIgnored has a server that, once known to echo case,
// sends before each real reply a forgery with the right ID and question
// but lowercased: the forgery is ignored and the real reply taken.
func TestCaseMismatchIgnored(t *testing.T) {
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		if strings.HasPrefix(r.Question[0].Name, "forged.") {
			b, _ := replyA(r, "203.0.113.66").Pack() // lowercased: Write bypasses the echo
			_, _ = w.Write(b)
		}
		answerA("192.0.2.1")(w, r)
	})
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})
	for i := 0; i < 50 && !f.all[0].echoesCase.Load(); i++ {
		exchangeA(t, f, "learn.example.org.")
	}
	if !f.all[0].echoesCase.Load() {
		t.Fatal("server that echoes case: got not learned")
	}
	for i := 0; i < caseMismatchLimit+2; i++ { // each real reply resets the count: never turned off
		if got, _ := exchangeA(t, f, "forged.example.org."); got != "192.0.2.1" {
			t.Errorf("query %d: got %s, want 192.0.2.1 (the reply in the case sent)", i, got)
		}
	}
	if got := counterValue(t, f, "errors", ts.addr.String(), kindSpoofed); got != caseMismatchLimit+2 {
		t.Errorf("spoofed errors: got %v, want %d", got, caseMismatchLimit+2)
	}
}

// TestServerLowercasingStillAnswered checks that a server that lowercases
// the question in its replies is used as before.
func TestServerLowercasingStillAnswered(t *testing.T) {
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		b, _ := replyA(r, "192.0.2.1").Pack()
		_, _ = w.Write(b)
	})
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})
	for i := 0; i < 10; i++ {
		if got, _ := exchangeA(t, f, "www.example.org."); got != "192.0.2.1" {
			t.Fatalf("answer %d: got %s, want 192.0.2.1", i, got)
		}
	}
	if f.all[0].echoesCase.Load() {
		t.Error("server that lowercases: got learned as echoing case")
	}
}

// TestServerThatStopsEchoing checks that a server known to echo case that
// starts lowercasing costs caseMismatchLimit-1 failed queries, then is used
// as before.
func TestServerThatStopsEchoing(t *testing.T) {
	var lowercase atomic.Bool
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		if lowercase.Load() {
			b, _ := replyA(r, "192.0.2.1").Pack()
			_, _ = w.Write(b)
			return
		}
		answerA("192.0.2.1")(w, r)
	})
	cfg := testConfig(ts)
	cfg.TryTimeout, cfg.Deadline = 50*time.Millisecond, 50*time.Millisecond
	f, _ := newTestForwarder(t, cfg, hooks{})
	for i := 0; i < 50 && !f.all[0].echoesCase.Load(); i++ {
		exchangeA(t, f, "learn.example.org.")
	}
	if !f.all[0].echoesCase.Load() {
		t.Fatal("server that echoes case: got not learned")
	}
	lowercase.Store(true)
	for i := 1; i <= caseMismatchLimit+2; i++ {
		_, _, err := exchange(context.Background(), f, query("www.example.org.", dns.TypeA))
		if failed := err != nil; failed != (i < caseMismatchLimit) {
			t.Errorf("query %d after the server stopped echoing: got error %v, want one only before the %dth", i, err, caseMismatchLimit)
		}
	}
	if f.all[0].echoesCase.Load() {
		t.Error("server that stopped echoing: still counted as echoing")
	}
}
