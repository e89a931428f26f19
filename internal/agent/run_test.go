package agent

import (
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/agent/agenttest"
)

// The agent tests run real agents on loopback with agenttest's upstream
// and flags; these helpers keep the agent itself at hand for checks of its
// state.

var (
	startUpstream = agenttest.StartUpstream
	freePort      = agenttest.FreePort
	ask           = agenttest.Ask
)

// testAgentConfig is an unprivileged agent on loopback (agenttest.Args).
func testAgentConfig(t testing.TB, up netip.AddrPort, dir string, port uint16, extra ...string) *Config {
	t.Helper()
	cfg, err := ParseConfig(agenttest.Args(t, up, dir, port, extra...))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testAgent is an agent running in the test process.
type testAgent struct {
	*agenttest.Running
	cfg *Config
	a   *Agent // for inspection; its fields are Run's to write
}

// newTestAgent is New with the log lines going to the test log.
func newTestAgent(t testing.TB, cfg *Config) *Agent {
	t.Helper()
	return New(cfg, agenttest.Logger(t, fmt.Sprintf("%p", cfg)), "dev")
}

// launchAgent starts the agent and returns at once.
func launchAgent(t testing.TB, cfg *Config) *testAgent {
	t.Helper()
	a := newTestAgent(t, cfg)
	return &testAgent{Running: agenttest.Launch(t, a.Run), cfg: cfg, a: a}
}

// startAgent runs the agent until the test ends and waits until it is ready.
func startAgent(t testing.TB, cfg *Config) *testAgent {
	t.Helper()
	a := newTestAgent(t, cfg)
	return &testAgent{Running: agenttest.Start(t, cfg.HealthAddr, a.Run), cfg: cfg, a: a}
}

// agent returns the running agent, for checks of its state.
func (ta *testAgent) agent() *Agent { return ta.a }

func TestAgentEndToEndLoopback(t *testing.T) {
	up := startUpstream(t)
	port := freePort(t)
	cfg := testAgentConfig(t, up.Addr, t.TempDir(), port)
	startAgent(t, cfg)
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	// Cluster zone from the fixture.
	r := ask(t, addr, "web.demo.svc.cluster.local.", dns.TypeA)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 || !r.Authoritative {
		t.Fatalf("fixture service: got %v", r)
	}
	if up.Queries.Load() != 0 {
		t.Errorf("cluster names went upstream %d times, want 0", up.Queries.Load())
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
	if got := up.Queries.Load(); got != 1 {
		t.Errorf("upstream queries for a miss and a hit: got %d, want 1", got)
	}

	// Negative answers carry the SOA and are cached.
	r = ask(t, addr, "nx.example.org.", dns.TypeA)
	if r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 {
		t.Fatalf("negative: got %v", r)
	}
	ask(t, addr, "nx.example.org.", dns.TypeA)
	if got := up.Queries.Load(); got != 2 {
		t.Errorf("upstream queries after a cached negative: got %d, want 2", got)
	}

	// A silent upstream: SERVFAIL for a new name, within the deadline.
	up.Silent.Store(true)
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
		{[]string{"--accept-sources", "10.244.0.0"}, `"10.244.0.0" is not a CIDR prefix`},
		{[]string{"--accept-sources", "10.244.1.0/16"}, "did you mean 10.244.0.0/16"},
		{[]string{"--local-ip", "169.254.20.10,fd00::10", "--accept-sources", "10.244.0.0/16"}, "no ipv6 prefix"},
		{[]string{"--accept-interfaces", "ca+li"}, "--accept-interfaces/--accept-sources"},
		{[]string{"--accept-interfaces", "cali+", "--setup-iptables=false"}, "need --setup-iptables"},
	} {
		_, err := ParseConfig(tc.args)
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
	cfg, err := ParseConfig([]string{"--config", path, "--port", "5401"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 5401 || len(cfg.LocalIPs) != 2 || cfg.TTL != 7*time.Second || len(cfg.StubDomains) != 2 {
		t.Errorf("got port %d, ips %v, ttl %v, stubs %v", cfg.Port, cfg.LocalIPs, cfg.TTL, cfg.StubDomains)
	}
	if err := writeFile(path, "prot: 53\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseConfig([]string{"--config", path}); err == nil || !strings.Contains(err.Error(), `unknown setting "prot"`) {
		t.Errorf("unknown key: got %v", err)
	}
}

func TestUnwritableSocketsDoNotStopDNS(t *testing.T) {
	up := startUpstream(t)
	port := freePort(t)
	cfg := testAgentConfig(t, up.Addr, t.TempDir(), port)
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
	if err := ta.Wait(500 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not exit") {
		t.Errorf("agent exited (%v), want it serving", err)
	}
}
