package upstream

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMarkDownAndProbeBack(t *testing.T) {
	var answering atomic.Bool
	flaky := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		if answering.Load() {
			answerA("192.0.2.3")(w, r)
		}
	})
	good := startServer(t, answerA("192.0.2.4"))
	cfg := testConfig(flaky, good)
	cfg.TryTimeout, cfg.FailThreshold = 250*time.Millisecond, 2
	h, events := healthEvents()
	f, _ := newTestForwarder(t, cfg, h)

	for i := 0; i < cfg.FailThreshold; i++ {
		if got, _ := exchangeA(t, f, "www.example."); got != "192.0.2.4" {
			t.Fatalf("query %d: got %s, want 192.0.2.4", i, got)
		}
	}
	if st := f.Status()[0]; st.Up || st.ConsecutiveFails != int64(cfg.FailThreshold) {
		t.Fatalf("flaky status: got %+v, want down after %d fails", st, cfg.FailThreshold)
	}
	if got := counterValue(t, f, "healthy", flaky.addr.String()); got != 0 {
		t.Errorf("healthy gauge of the down server: got %v, want 0", got)
	}
	if !f.Healthy() {
		t.Errorf("Healthy: got false, want true while one default server is up")
	}
	// Sequential order now puts the down server last.
	exchangeA(t, f, "www.example.")
	if got, want := flaky.udpQueries.Load(), int64(cfg.FailThreshold); got != want {
		t.Errorf("queries at the down server: got %d, want %d", got, want)
	}

	answering.Store(true)
	waitEvent(t, events, healthEvent{flaky.addr, true})
	if st := f.Status()[0]; !st.Up || st.ConsecutiveFails != 0 {
		t.Errorf("flaky status after probe: got %+v, want up", st)
	}
	if flaky.probes.Load() == 0 {
		t.Errorf("probes: got 0, want at least 1")
	}
	if got, _ := exchangeA(t, f, "www.example."); got != "192.0.2.3" {
		t.Errorf("after recovery: got %s, want 192.0.2.3 from the first server", got)
	}
	// The probes are health checks, not requests: the flaky server was sent
	// FailThreshold queries that failed and one that was answered.
	if got, want := counterValue(t, f, "requests", flaky.addr.String(), protoUDP), float64(cfg.FailThreshold+1); got != want {
		t.Errorf("requests counted at the flaky server: got %v, want %v (probes excluded)", got, want)
	}
	if got := testutil.ToFloat64(f.m.coredns.probes.WithLabelValues(flaky.addr.String(), "ok")); got != 1 {
		t.Errorf("successful probes: got %v, want 1", got)
	}
	if got := testutil.ToFloat64(f.m.coredns.fwdResponses.WithLabelValues("NOERROR", flaky.addr.String())); got != 1 {
		t.Errorf("coredns_forward_responses_total{rcode=NOERROR} of the flaky server: got %v, want 1", got)
	}
	if got := testutil.ToFloat64(f.m.coredns.fwdRequests.WithLabelValues(flaky.addr.String())); got != float64(cfg.FailThreshold+1) {
		t.Errorf("coredns_forward_requests_total of the flaky server: got %v, want %d", got, cfg.FailThreshold+1)
	}
}

func TestAllDownStillTried(t *testing.T) {
	var answering atomic.Bool
	only := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		if answering.Load() && r.Question[0].Name != "." {
			answerA("192.0.2.5")(w, r)
		}
	})
	cfg := testConfig(only)
	cfg.TryTimeout, cfg.Deadline, cfg.FailThreshold = 250*time.Millisecond, 2*time.Second, 1
	cfg.ProbeInterval = time.Hour // no probe interferes
	h, events := healthEvents()
	f, _ := newTestForwarder(t, cfg, h)

	if _, _, err := exchange(context.Background(), f, query("www.example.", dns.TypeA)); !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("got %v, want ErrNoAnswer", err)
	}
	if f.Healthy() {
		t.Errorf("Healthy: got true, want false with the only server down")
	}
	answering.Store(true)
	if got, _ := exchangeA(t, f, "www.example."); got != "192.0.2.5" {
		t.Errorf("got %s, want 192.0.2.5 from the down server", got)
	}
	waitEvent(t, events, healthEvent{only.addr, true})
	if !f.Healthy() {
		t.Errorf("Healthy: got false, want true after a real answer")
	}
}

func TestPolicies(t *testing.T) {
	ips := []string{"192.0.2.21", "192.0.2.22", "192.0.2.23"}
	var servers []*testServer
	for _, ip := range ips {
		servers = append(servers, startServer(t, answerA(ip)))
	}
	tests := []struct {
		policy Policy
		want   []string // nil: each server at least once in 60 queries
	}{
		{PolicySequential, []string{ips[0], ips[0], ips[0], ips[0]}},
		{PolicyRoundRobin, []string{ips[0], ips[1], ips[2], ips[0], ips[1], ips[2]}},
		{PolicyRandom, nil},
		{"", nil},
	}
	for _, tt := range tests {
		t.Run("policy="+string(tt.policy), func(t *testing.T) {
			cfg := testConfig(servers...)
			cfg.Policy = tt.policy
			f, _ := newTestForwarder(t, cfg, hooks{})
			if tt.want != nil {
				for i, want := range tt.want {
					if got, _ := exchangeA(t, f, "www.example."); got != want {
						t.Errorf("query %d: got %s, want %s", i, got, want)
					}
				}
				return
			}
			seen := map[string]int{}
			for i := 0; i < 60; i++ {
				got, _ := exchangeA(t, f, "www.example.")
				seen[got]++
			}
			for _, ip := range ips {
				if seen[ip] == 0 {
					t.Errorf("server %s: got 0 of 60 queries, want some (%v)", ip, seen)
				}
			}
		})
	}
}

func TestCloseIsIdempotentAndStopsProbes(t *testing.T) {
	ts := startServer(t, silent)
	cfg := testConfig(ts)
	cfg.TryTimeout, cfg.FailThreshold, cfg.ProbeInterval = 10*time.Millisecond, 1, time.Millisecond
	f, _ := newTestForwarder(t, cfg, hooks{})
	if _, _, err := exchange(context.Background(), f, query("www.example.", dns.TypeA)); !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("got %v, want ErrNoAnswer", err)
	}
	if !f.all[0].probing.Load() {
		t.Fatalf("probing: got false, want a probe running for the down server")
	}
	for i := 0; i < 2; i++ {
		if err := f.Close(); err != nil {
			t.Errorf("Close #%d: %v", i+1, err)
		}
	}
	if f.all[0].probing.Load() {
		t.Errorf("probing after Close: got true, want false")
	}
	if _, _, err := exchange(context.Background(), f, query("www.example.", dns.TypeA)); !errors.Is(err, ErrClosed) {
		t.Errorf("Exchange after Close: got %v, want ErrClosed", err)
	}
}
