package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/internal/agent/agenttest"
)

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
			agenttest.Ask(t, a.dns, name, dns.TypeA)
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
		agenttest.Ask(t, a.dns, "web.demo.svc.cluster.local.", dns.TypeA) // NOERROR: filtered out
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
				if l.Upstream != a.up.Addr.String() {
					t.Errorf("upstream: got %q, want %s", l.Upstream, a.up.Addr)
				}
				return
			}
			if i > 5 {
				t.Fatalf("no upstream answer among the lines: last %+v", l)
			}
		}
	})
}
