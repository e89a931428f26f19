package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// loadClient sends queries over UDP at a steady pace until stopped and counts
// what comes back.
type loadClient struct {
	net                            string // "udp" or "tcp" (a connection per query)
	sent, answered, servfail, lost atomic.Int64
}

func (l *loadClient) run(ctx context.Context, addr string, names []string, every time.Duration) {
	c := &dns.Client{Net: l.net, Timeout: time.Second}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		name := names[i%len(names)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := new(dns.Msg)
			m.SetQuestion(name, dns.TypeA)
			l.sent.Add(1)
			r, _, err := c.Exchange(m, addr)
			switch {
			case err != nil:
				l.lost.Add(1)
			case r.Rcode == dns.RcodeServerFailure:
				l.servfail.Add(1)
			default:
				l.answered.Add(1)
			}
		}()
	}
}

func TestHandoverLosesNoQuery(t *testing.T) {
	up := startUpstream(t)
	port := freePort(t)
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	cfgA := testAgentConfig(t, up.Addr, dir, port)
	first := startAgent(t, cfgA)
	names := []string{"web.demo.svc.cluster.local.", "a.example.org.", "b.example.org.", "c.example.org."}
	for _, n := range names {
		ask(t, addr, n, dns.TypeA)
	}
	before := up.Queries.Load()

	ctx, cancel := context.WithCancel(context.Background())
	loads := []*loadClient{{net: "udp"}, {net: "tcp"}}
	var wg sync.WaitGroup
	for _, l := range loads {
		wg.Add(1)
		go func() { defer wg.Done(); l.run(ctx, addr, names, 2*time.Millisecond) }()
	}

	// Three upgrades in a row, each successor taking over from the last. As in
	// a DaemonSet, the successor shares the health and metrics ports; the
	// predecessor exits by itself once it has handed over.
	prev := first
	for i := 0; i < 3; i++ {
		time.Sleep(150 * time.Millisecond)
		cfg := testAgentConfig(t, up.Addr, dir, port)
		cfg.HealthAddr, cfg.MetricsAddr = cfgA.HealthAddr, cfgA.MetricsAddr
		next := launchAgent(t, cfg)
		if err := prev.Wait(20 * time.Second); err != nil {
			t.Fatalf("predecessor %d: %v", i, err)
		}
		prev = next
	}
	time.Sleep(150 * time.Millisecond)
	cancel()
	wg.Wait()
	for _, load := range loads {
		t.Logf("%s during 3 handovers: sent %d, answered %d, SERVFAIL %d, lost %d", load.net,
			load.sent.Load(), load.answered.Load(), load.servfail.Load(), load.lost.Load())
		if load.lost.Load() != 0 || load.servfail.Load() != 0 {
			t.Errorf("%s: got %d lost and %d SERVFAIL, want none", load.net, load.lost.Load(), load.servfail.Load())
		}
		if load.answered.Load() < 100 {
			t.Errorf("%s: only %d queries answered; the load did not run", load.net, load.answered.Load())
		}
	}
	// The warm cache came along: no new upstream queries for the names.
	if got := up.Queries.Load(); got != before {
		t.Errorf("upstream queries after handovers: got %d new, want 0 (warm cache handed over)", got-before)
	}
}

// TestHandoverRefusedOnOtherAddresses: a successor configured for other
// addresses does not take the predecessor's sockets; it opens its own
// (SO_REUSEPORT) and both serve until the predecessor is stopped.
func TestHandoverRefusedOnOtherAddresses(t *testing.T) {
	up := startUpstream(t)
	port := freePort(t)
	dir := t.TempDir()
	cfgA := testAgentConfig(t, up.Addr, dir, port)
	a := startAgent(t, cfgA)

	cfgB := testAgentConfig(t, up.Addr, dir, port, "--local-ip", "127.0.0.1,127.0.0.2")
	startAgent(t, cfgB)
	if err := a.Wait(300 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not exit") {
		t.Fatalf("predecessor exited (%v); want it serving, the handover refused", err)
	}
	// The successor relies on the same link and rules: stopping the
	// predecessor now must leave them in place.
	if keep, why := a.agent().keepHostState(); !keep {
		t.Errorf("predecessor would tear down the host state under a running successor (%q)", why)
	}
	for _, ip := range []string{"127.0.0.1", "127.0.0.2"} {
		r := ask(t, fmt.Sprintf("%s:%d", ip, port), "web.demo.svc.cluster.local.", dns.TypeA)
		if r.Rcode != dns.RcodeSuccess {
			t.Errorf("%s with both agents up: got %s, want NOERROR", ip, dns.RcodeToString[r.Rcode])
		}
	}
	if err := a.Stop(); err != nil {
		t.Fatalf("stopping the predecessor: %v", err)
	}
	for i := 0; i < 20; i++ { // every query lands on the successor's own sockets now
		r := ask(t, fmt.Sprintf("127.0.0.1:%d", port), "web.demo.svc.cluster.local.", dns.TypeA)
		if r.Rcode != dns.RcodeSuccess {
			t.Fatalf("after the predecessor stopped: got %s, want NOERROR", dns.RcodeToString[r.Rcode])
		}
	}
}
