package upstream

import (
	"strings"
	"sync"
	"testing"

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
	if !echoing(f) {
		t.Error("server that echoes case: got not learned")
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
	if echoing(f) {
		t.Error("server that lowercases: got learned as echoing case")
	}
}
