package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/testnet"
)

// testUpstream is a loopback authoritative server for example.org. that
// counts queries and can be made silent.
type testUpstream struct {
	addr    netip.AddrPort
	queries atomic.Int64
	silent  atomic.Bool
}

func startUpstream(t testing.TB) *testUpstream {
	t.Helper()
	u := &testUpstream{}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.addr = pc.LocalAddr().(*net.UDPAddr).AddrPort()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		u.queries.Add(1)
		if u.silent.Load() {
			return
		}
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		switch {
		case strings.HasPrefix(strings.ToLower(q.Name), "servfail"):
			m.Rcode = dns.RcodeServerFailure
		case strings.HasPrefix(strings.ToLower(q.Name), "nx"):
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: "example.org.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60},
				Ns: "ns.example.org.", Mbox: "h.example.org.", Serial: 1, Minttl: 30}}
		case q.Qtype == dns.TypeA:
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 7)}}
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: h}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return u
}

// freePort returns a loopback port, free for TCP and UDP, that no other
// test in this process gets (see testnet.FreePort).
func freePort(t testing.TB) uint16 {
	t.Helper()
	p, err := testnet.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testAgentConfig is an unprivileged agent on loopback.
func testAgentConfig(t testing.TB, up netip.AddrPort, dir string, port uint16, extra ...string) *runConfig {
	t.Helper()
	args := append([]string{
		"--local-ip", "127.0.0.1", "--port", fmt.Sprint(port),
		"--setup-interface=false", "--setup-iptables=false",
		"--upstream", up.String(), "--upstream-timeout", "300ms", "--upstream-deadline", "600ms",
		"--health-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--admin-socket", filepath.Join(dir, "admin.sock"),
		"--handover-socket", filepath.Join(dir, "handover.sock"),
		"--fixture", "../../deploy/examples/fixture.yaml",
	}, extra...)
	cfg, err := parseRunConfig(args)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testAgent is an agent running in the test process.
type testAgent struct {
	cfg    *runConfig
	cancel context.CancelFunc
	errc   chan error // receives run's result once
	a      *agent     // for inspection; its fields are run's to write
	once   sync.Once
	err    error
}

// launchAgent starts the agent and returns at once.
func launchAgent(t testing.TB, cfg *runConfig) *testAgent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ta := &testAgent{cfg: cfg, cancel: cancel, errc: make(chan error, 1)}
	log := slog.New(slog.NewTextHandler(testLogWriter{t}, nil)).With("agent", fmt.Sprintf("%p", cfg))
	ta.a = newAgent(cfg, log)
	go func() { ta.errc <- ta.a.run(ctx) }()
	t.Cleanup(func() { _ = ta.stop() })
	return ta
}

// agent returns the running agent, for checks of its state.
func (ta *testAgent) agent() *agent { return ta.a }

// wait returns run's result once the agent has exited by itself, or an
// error after d.
func (ta *testAgent) wait(d time.Duration) error {
	select {
	case err := <-ta.errc:
		ta.once.Do(func() { ta.err = err })
		return err
	case <-time.After(d):
		return fmt.Errorf("agent did not exit within %v", d)
	}
}

// stop cancels the agent (as SIGTERM does) and returns run's result.
func (ta *testAgent) stop() error {
	ta.once.Do(func() {
		ta.cancel()
		select {
		case ta.err = <-ta.errc:
		case <-time.After(15 * time.Second):
			ta.err = fmt.Errorf("agent did not stop")
		}
	})
	return ta.err
}

// startAgent runs the agent until the test ends and waits until it is ready.
func startAgent(t testing.TB, cfg *runConfig) *testAgent {
	t.Helper()
	ta := launchAgent(t, cfg)
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Ready means listeners serving and the zone synced: before that the
		// agent answers SERVFAIL for cluster names.
		if resp, err := http.Get("http://" + cfg.HealthAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-ta.errc:
			t.Fatalf("agent exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("agent not ready within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return ta
}

func ask(t testing.TB, addr string, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, _, err := (&dns.Client{Timeout: 3 * time.Second}).Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

func TestAgentEndToEndLoopback(t *testing.T) {
	up := startUpstream(t)
	port := freePort(t)
	cfg := testAgentConfig(t, up.addr, t.TempDir(), port)
	startAgent(t, cfg)
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	// Cluster zone from the fixture.
	r := ask(t, addr, "web.demo.svc.cluster.local.", dns.TypeA)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 || !r.Authoritative {
		t.Fatalf("fixture service: got %v", r)
	}
	if up.queries.Load() != 0 {
		t.Errorf("cluster names went upstream %d times, want 0", up.queries.Load())
	}

	// Miss, then hit: one upstream query.
	r = ask(t, addr, "www.example.org.", dns.TypeA)
	if len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 300 {
		t.Fatalf("miss: got %v", r.Answer)
	}
	r = ask(t, addr, "WWW.example.ORG.", dns.TypeA)
	if len(r.Answer) != 1 || r.Answer[0].Header().Name != "WWW.example.ORG." {
		t.Fatalf("hit: got %v, want the client's case", r.Answer)
	}
	if got := up.queries.Load(); got != 1 {
		t.Errorf("upstream queries for a miss and a hit: got %d, want 1", got)
	}

	// Negative answers carry the SOA and are cached.
	r = ask(t, addr, "nx.example.org.", dns.TypeA)
	if r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 {
		t.Fatalf("negative: got %v", r)
	}
	ask(t, addr, "nx.example.org.", dns.TypeA)
	if got := up.queries.Load(); got != 2 {
		t.Errorf("upstream queries after a cached negative: got %d, want 2", got)
	}

	// A silent upstream: SERVFAIL for a new name, within the deadline.
	up.silent.Store(true)
	start := time.Now()
	r = ask(t, addr, "new.example.org.", dns.TypeA)
	if r.Rcode != dns.RcodeServerFailure {
		t.Errorf("silent upstream: got %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	t.Logf("SERVFAIL after %v with a silent upstream (deadline 600ms)", time.Since(start).Round(time.Millisecond))

	// Health and readiness answer for real.
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + cfg.HealthAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("%s: %d %s", path, resp.StatusCode, strings.TrimSpace(string(body)))
		if path == "/healthz" && resp.StatusCode != http.StatusOK {
			t.Errorf("healthz: got %d, want 200", resp.StatusCode)
		}
	}
}

func TestBadConfigFailsWithAClearMessage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--local-ip", "nope"}, `"nope" is not an IP address`},
		{[]string{"--port", "70000"}, "--port 70000"},
		{[]string{"--cache-size", "12XB"}, "unknown unit"},
		{[]string{"--sync-interval", "10"}, "is not a duration: give a number with a unit"},
		{[]string{"--metrics-addr", "0.0.0.0:9253"}, "refusing to listen on every address"},
		{[]string{"--kubeconfig", "a", "--fixture", "b"}, "exclusive"},
		{[]string{"--log-format", "xml"}, "--log-format"},
	} {
		_, err := parseRunConfig(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

func TestConfigFileFlagsWin(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	if err := writeFile(path, "port: 5400\nlocal-ip: [127.0.0.2, 127.0.0.3]\nttl: 7s\nstub-domain: [a.example=10.0.0.1, b.example=10.0.0.2]\n"); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseRunConfig([]string{"--config", path, "--port", "5401"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 5401 || len(cfg.LocalIPs) != 2 || cfg.TTL != 7*time.Second || len(cfg.StubDomains) != 2 {
		t.Errorf("got port %d, ips %v, ttl %v, stubs %v", cfg.Port, cfg.LocalIPs, cfg.TTL, cfg.StubDomains)
	}
	if err := writeFile(path, "prot: 53\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := parseRunConfig([]string{"--config", path}); err == nil || !strings.Contains(err.Error(), `unknown setting "prot"`) {
		t.Errorf("unknown key: got %v", err)
	}
}

// testLogWriter sends the agent's log lines to the test log, shown on failure.
type testLogWriter struct{ t testing.TB }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func TestUnwritableSocketsDoNotStopDNS(t *testing.T) {
	up := startUpstream(t)
	port := freePort(t)
	cfg := testAgentConfig(t, up.addr, t.TempDir(), port)
	// A regular file where the socket directories should be: neither can be created.
	blocker := filepath.Join(t.TempDir(), "file")
	if err := writeFile(blocker, "x"); err != nil {
		t.Fatal(err)
	}
	cfg.AdminSocket = filepath.Join(blocker, "admin.sock")
	cfg.HandoverSocket = filepath.Join(blocker, "handover.sock")
	ta := startAgent(t, cfg)
	r := ask(t, fmt.Sprintf("127.0.0.1:%d", port), "web.demo.svc.cluster.local.", dns.TypeA)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
		t.Errorf("got %v, want the service answered with the admin and handover sockets unavailable", r)
	}
	// The socket failures come right at start; an agent that stopped for
	// them would have exited by now (errc is written once run returns).
	if err := ta.wait(500 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not exit") {
		t.Errorf("agent exited (%v), want it serving", err)
	}
}
