package main

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestLatencyConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  latencyConfig
		ok   bool
	}{
		{"defaults", latencyConfig{Server: "127.0.0.1:53", Rate: 10000, Duration: 10 * time.Second}, true},
		{"no server", latencyConfig{Rate: 1, Duration: time.Second}, false},
		{"zero rate", latencyConfig{Server: "x:1", Duration: time.Second}, false},
		{"rate too high", latencyConfig{Server: "x:1", Rate: 200001, Duration: time.Second}, false},
		{"no duration", latencyConfig{Server: "x:1", Rate: 1}, false},
		{"too long", latencyConfig{Server: "x:1", Rate: 1, Duration: 11 * time.Minute}, false},
		{"IDs wrap within timeout", latencyConfig{Server: "x:1", Rate: 100000, Duration: time.Second, Sockets: 1}, false},
		{"too many sockets", latencyConfig{Server: "x:1", Rate: 1, Duration: time.Second, Sockets: 65}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if got := err == nil; got != tt.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	us := func(n ...int) []time.Duration {
		var out []time.Duration
		for _, v := range n {
			out = append(out, time.Duration(v)*time.Microsecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		res    latencyResult
		p      float64
		want   time.Duration
		wantOK bool
	}{
		{"median of 1..100", latencyResult{Sent: 100, Latencies: us(hundred...)}, 50, 50 * time.Microsecond, true},
		{"p99 of 1..100", latencyResult{Sent: 100, Latencies: us(hundred...)}, 99, 99 * time.Microsecond, true},
		{"p99.9 of 1..100", latencyResult{Sent: 100, Latencies: us(hundred...)}, 99.9, 100 * time.Microsecond, true},
		{"p99 of 98 answered", latencyResult{Sent: 100, Latencies: us(hundred[:98]...)}, 99, 98 * time.Microsecond, true},
		{"p50 of 98 answered", latencyResult{Sent: 100, Latencies: us(hundred[:98]...)}, 50, 49 * time.Microsecond, true},
		{"single", latencyResult{Sent: 1, Latencies: us(7)}, 99.9, 7 * time.Microsecond, true},
		{"nothing sent", latencyResult{}, 50, 0, false},
	}
	t.Run("format", func(t *testing.T) {
		r := latencyResult{Sent: 100, Answered: 100, Latencies: us(hundred...)}
		want := "p50_us=50.0 p90_us=90.0 p99_us=99.0 p999_us=100.0"
		if got := r.format(); !strings.Contains(got, want) {
			t.Errorf("format() = %q, want it to hold %q", got, want)
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.res.percentile(tt.p)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("percentile(%v) = %v, %v; want %v, %v", tt.p, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestReadQueries(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		limit   int
		want    int
		wantErr bool
	}{
		{"dnsperf lines", "a.example. A\nb.example AAAA\n# comment\n\n_x._tcp.c.example. SRV\n", 10, 3, false},
		{"type defaults to A", "a.example.\n", 10, 1, false},
		{"limit", "a. A\nb. A\nc. A\n", 2, 2, false},
		{"unknown type", "a.example. BOGUS\n", 10, 0, true},
		{"empty", "# nothing\n", 10, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readQueries(strings.NewReader(tt.in), tt.limit)
			if (err != nil) != tt.wantErr {
				t.Fatalf("got error %v, want error %v", err, tt.wantErr)
			}
			if len(got) != tt.want {
				t.Fatalf("got %d queries, want %d", len(got), tt.want)
			}
			for i, b := range got {
				m := new(dns.Msg)
				if err := m.Unpack(b); err != nil || len(m.Question) != 1 || !m.RecursionDesired {
					t.Errorf("query %d: got %v (err %v), want one question with RD", i, m, err)
				}
			}
		})
	}
}

// startServer runs a loopback UDP server whose handler answers every query
// except those for names starting with "drop".
func startServer(t testing.TB, seen *atomic.Int64) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, r *dns.Msg) {
		seen.Add(1)
		if strings.HasPrefix(r.Question[0].Name, "drop") {
			return
		}
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeNameError)
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: mux}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	done := make(chan error, 1)
	go func() { done <- srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() {
		_ = srv.Shutdown()
		<-done
	})
	return pc.LocalAddr().String()
}

// TestRunLatencyCountsAnswersAndLosses, with the replies timed at their
// read and (on Linux) at their arrival by the kernel's receive time: every
// answered reply gets a latency within the timeout, with the kernel's time
// when asked for it.
func TestRunLatencyCountsAnswersAndLosses(t *testing.T) {
	modes := []bool{false}
	if runtime.GOOS == "linux" {
		modes = append(modes, true)
	}
	for _, kernelRx := range modes {
		t.Run(fmt.Sprintf("kernelRx=%v", kernelRx), func(t *testing.T) {
			var seen atomic.Int64
			addr := startServer(t, &seen)
			// One query in four is never answered.
			qs, err := readQueries(strings.NewReader("a.example. A\nb.example. A\nc.example. A\ndrop.example. A\n"), 10)
			if err != nil {
				t.Fatal(err)
			}
			cfg := latencyConfig{Server: addr, Rate: 400, Duration: 500 * time.Millisecond, Timeout: 500 * time.Millisecond, Sockets: 3, KernelRx: kernelRx}
			res, err := runLatency(context.Background(), cfg, qs)
			if err != nil {
				t.Fatal(err)
			}
			if res.Sent != 200 {
				t.Errorf("got %d sent, want 200 (rate x duration)", res.Sent)
			}
			if got := seen.Load(); got != 200 {
				t.Errorf("server saw %d queries, want 200", got)
			}
			if res.Answered != 150 || res.Rcodes[dns.RcodeNameError] != 150 {
				t.Errorf("got %d answered, %d NXDOMAIN; want 150 and 150", res.Answered, res.Rcodes[dns.RcodeNameError])
			}
			for _, d := range res.Latencies {
				if d <= 0 || d > cfg.Timeout {
					t.Fatalf("latency %v: want one within (0, %v]", d, cfg.Timeout)
				}
			}
			want := "sent=200 answered=150 lost=50 lost_pct=25.00"
			if kernelRx {
				want += " rx_time=kernel unstamped=0" // every reply had the kernel's time
			}
			if got := res.format(); !strings.Contains(got, want) {
				t.Errorf("format() = %q, want %q", got, want)
			}
		})
	}
}

func TestRunLatencyStopsOnCancel(t *testing.T) {
	var seen atomic.Int64
	addr := startServer(t, &seen)
	qs, err := readQueries(strings.NewReader("a.example. A\n"), 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := runLatency(ctx, latencyConfig{Server: addr, Rate: 1000, Duration: time.Minute}, qs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 0 {
		t.Errorf("got %d sent after cancel, want 0", res.Sent)
	}
}
