package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/internal/agent"
	"github.com/nodecache/nodecache/internal/agent/agenttest"
	"github.com/nodecache/nodecache/internal/doctor"
	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/kubezone"
)

// cliAgent is a real agent on loopback (fixture zone, loopback upstream)
// for the CLI tests.
type cliAgent struct {
	socket  string
	dns     string // 127.0.0.1:port
	metrics string // host:port of /metrics
	up      *agenttest.Upstream
	cfg     *agent.Config
}

func startCLIAgent(t testing.TB, extra ...string) *cliAgent {
	t.Helper()
	up := agenttest.StartUpstream(t)
	port := agenttest.FreePort(t)
	dir := t.TempDir()
	args := agenttest.Args(t, up.Addr, dir, port, append([]string{"--node-name", "node-a", "--watch-pods"}, extra...)...) // the fixture's node of demo/web-1
	cfg := startAgentArgs(t, args)
	return &cliAgent{socket: cfg.AdminSocket, dns: fmt.Sprintf("127.0.0.1:%d", port), metrics: cfg.MetricsAddr, up: up, cfg: cfg}
}

// startAgentArgs runs `nodecache run ARGS` in the test process until the
// test ends, and returns once it is ready.
func startAgentArgs(t testing.TB, args []string) *agent.Config {
	t.Helper()
	cfg, err := agent.ParseConfig(args)
	if err != nil {
		t.Fatal(err)
	}
	agenttest.Start(t, cfg.HealthAddr, agent.New(cfg, agenttest.Logger(t, "cli"), "dev").Run)
	return cfg
}

// cli runs a CLI command against a and returns what it printed.
func (a *cliAgent) cli(t testing.TB, args ...string) (string, error) {
	t.Helper()
	fn, ok := cliTable("dev")[args[0]]
	if !ok {
		t.Fatalf("no command %q", args[0])
	}
	var out bytes.Buffer
	err := fn(context.Background(), &out, append(args[1:], "--admin-socket", a.socket))
	return out.String(), err
}

// text runs a command that must succeed and checks its output contains want.
func (a *cliAgent) text(t testing.TB, args []string, want ...string) string {
	t.Helper()
	out, err := a.cli(t, args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%v: output lacks %q:\n%s", args, w, out)
		}
	}
	return out
}

// json runs a command with -o json and decodes its output into v.
func (a *cliAgent) json(t testing.TB, v any, args ...string) {
	t.Helper()
	out, err := a.cli(t, append(args, "-o", "json")...)
	if err != nil {
		t.Fatalf("%v -o json: %v", args, err)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v -o json: not JSON: %v\n%s", args, err, out)
	}
}

// ask sends name/qtype to the agent's DNS port, so a subtest makes the
// cache and upstream state it checks.
func (a *cliAgent) ask(t testing.TB, name string, qtype uint16) {
	t.Helper()
	agenttest.Ask(t, a.dns, name, qtype)
}

// TestCLIAgainstTheAgent runs every command against one agent. Each subtest
// makes the state it checks, so any one runs alone (-run .../cache).
func TestCLIAgainstTheAgent(t *testing.T) {
	a := startCLIAgent(t)
	upAddr := a.up.Addr.String()

	t.Run("status", func(t *testing.T) {
		a.text(t, []string{"status"}, "serving, ready", "udp+tcp "+a.dns, "not managed (--setup-interface=false)",
			"cluster.local synced, source", "UPSTREAM", upAddr)
		var st adminapi.Status
		a.json(t, &st, "status")
		if !st.Serving || st.Zone == nil || !st.Zone.Synced || st.Zone.Services == 0 {
			t.Errorf("got serving %t zone %+v, want serving and a synced zone with services", st.Serving, st.Zone)
		}
		if len(st.Upstreams) != 1 || st.Upstreams[0].Addr != upAddr {
			t.Errorf("upstreams: got %+v, want %s", st.Upstreams, upAddr)
		}
	})

	t.Run("query", func(t *testing.T) {
		a.text(t, []string{"query", "web.demo.svc.cluster.local"}, "NOERROR from zone", "10.96.0.10", "flags: aa")
		var qr adminapi.Query
		a.json(t, &qr, "query", "www.example.org", "a")
		if qr.Rcode != "NOERROR" || qr.Source != "upstream" || qr.Server != upAddr || len(qr.Answer) != 1 {
			t.Errorf("first ask: got %+v, want NOERROR from upstream %s with one answer", qr, upAddr)
		}
		a.text(t, []string{"query", "-o", "text", "www.example.org", "A"}, "from cache hit", "192.0.2.7")
		a.json(t, &qr, "query", "nx.example.org", "AAAA")
		if qr.Rcode != "NXDOMAIN" || len(qr.Ns) != 1 {
			t.Errorf("nx: got %+v, want NXDOMAIN with the SOA", qr)
		}
	})

	t.Run("explain", func(t *testing.T) {
		host := filepath.Join(t.TempDir(), "host-resolv.conf")
		if err := os.WriteFile(host, []byte("search corp.example\nnameserver 10.0.0.2\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		var rep explainReport
		a.json(t, &rep, "explain", "web", "--pod", "demo/web-1", "--host-resolv-conf", host)
		if rep.Resolved != "web.demo.svc.cluster.local." || rep.Queries != 2 || len(rep.Steps) != 1 || rep.Steps[0].Outcome != outcomeFound {
			t.Errorf("web: got %+v, want resolved on the first name in 2 queries", rep)
		}
		a.json(t, &rep, "explain", "nxhost.example.org", "--pod", "demo/web-1", "--host-resolv-conf", host)
		var names []string
		for _, s := range rep.Steps {
			names = append(names, s.Name)
		}
		want := []string{"nxhost.example.org.demo.svc.cluster.local.", "nxhost.example.org.svc.cluster.local.",
			"nxhost.example.org.cluster.local.", "nxhost.example.org.corp.example.", "nxhost.example.org."}
		if strings.Join(names, " ") != strings.Join(want, " ") || rep.Resolved != "" || rep.Queries != 10 {
			t.Errorf("nxhost: got names %v, resolved %q, %d queries; want %v, none, 10", names, rep.Resolved, rep.Queries, want)
		}
		a.text(t, []string{"explain", "nxhost.example.org", "--pod", "demo/web-1", "--host-resolv-conf", host},
			"glibc, ndots 5, search demo.svc.cluster.local svc.cluster.local cluster.local corp.example",
			"NOT resolved after 10 queries for 5 names")
		// The pod given, not just its namespace: one on another node, or
		// none, is an error rather than a guess.
		for _, pod := range []string{"demo/web-2", "demo/nosuch"} {
			_, err := a.cli(t, "explain", "web", "--pod", pod, "--host-resolv-conf", host)
			if err == nil || !strings.Contains(err.Error(), "no pod "+pod+" on this node") {
				t.Errorf("explain --pod %s (not on this node): got %v, want an error saying so", pod, err)
			}
		}
		conf := filepath.Join(t.TempDir(), "resolv.conf")
		if err := os.WriteFile(conf, []byte("search example.org\noptions ndots:1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		a.text(t, []string{"explain", "www", "--resolv-conf", conf}, "resolved as www.example.org. after 2 queries for 1 names")
		if _, err := a.cli(t, "explain", "www"); err == nil || !strings.Contains(err.Error(), "exactly one of --pod") {
			t.Errorf("no --pod or --resolv-conf: got %v, want a usage error", err)
		}
	})

	t.Run("cache", func(t *testing.T) {
		a.ask(t, "cached.example.org.", dns.TypeA) // a miss, then a hit
		a.ask(t, "cached.example.org.", dns.TypeA)
		a.ask(t, "nx-cached.example.org.", dns.TypeA)
		var st cache.Stats
		a.json(t, &st, "cache", "stats")
		if st.Entries == 0 || st.Hits == 0 {
			t.Errorf("stats: got %+v, want entries and hits", st)
		}
		var dump []cache.EntryInfo
		a.json(t, &dump, "cache", "dump", "--filter", "cached.example.org")
		if len(dump) == 0 || dump[0].Name != "cached.example.org." {
			t.Errorf("dump: got %+v, want cached.example.org.", dump)
		}
		a.text(t, []string{"cache", "dump", "example.org"}, "cached.example.org.", "positive", "nx-cached.example.org.", "negative")
		// No name: a usage error, and nothing flushed.
		before := len(dump)
		if _, err := a.cli(t, "cache", "flush"); ExitCode(err) != exitUsage {
			t.Errorf("cache flush with no name: got %v (exit %d), want a usage error (exit %d)", err, ExitCode(err), exitUsage)
		}
		if _, err := a.cli(t, "cache", "flush", "x.example.org", "--all"); ExitCode(err) != exitUsage {
			t.Errorf("cache flush NAME --all: got %v, want a usage error", err)
		}
		a.json(t, &dump, "cache", "dump", "--filter", "cached.example.org")
		if len(dump) != before {
			t.Errorf("dump after a flush with no name: got %d entries, want %d (nothing flushed)", len(dump), before)
		}
		a.text(t, []string{"cache", "flush", "cached.example.org"}, "removed 1 entries for cached.example.org. (every type; names below it kept)")
		a.json(t, &dump, "cache", "dump", "--filter", "cached.example.org")
		if len(dump) != 0 {
			t.Errorf("dump after flush: got %+v, want none", dump)
		}
		a.json(t, &dump, "cache", "dump", "--filter", "example.org")
		a.text(t, []string{"cache", "flush", "--zone", "example.org"}, fmt.Sprintf("removed %d entries for example.org. and the names below it", len(dump)))
		a.json(t, &dump, "cache", "dump", "--filter", "example.org")
		if len(dump) != 0 {
			t.Errorf("dump after a zone flush: got %+v, want none", dump)
		}
		a.text(t, []string{"cache", "flush", "--all", "-o", "yaml"}, "all: true", "flushed: ")
		if _, err := a.cli(t, "cache", "drop"); ExitCode(err) != exitUsage {
			t.Errorf("cache drop: got %v, want a usage error", err)
		}
	})

	t.Run("zone", func(t *testing.T) {
		var recs []kubezone.Record
		a.json(t, &recs, "zone", "list", "--namespace", "demo")
		if !hasRecord(recs, "web.demo.svc.cluster.local.", "A", "10.96.0.10") || hasRecord(recs, "shop.default.svc.cluster.local.", "A", "10.96.0.60") {
			t.Errorf("list --namespace demo: got %d records, want web's A and not default's", len(recs))
		}
		a.json(t, &recs, "zone", "show", "web.demo")
		for _, r := range recs {
			if !dns.IsSubDomain("web.demo.svc.cluster.local.", r.Name) {
				t.Errorf("show web.demo: got %s, want only web.demo.svc.cluster.local. and below", r.Name)
			}
		}
		if !hasRecord(recs, "_http._tcp.web.demo.svc.cluster.local.", "SRV", "") {
			t.Errorf("show web.demo: got %+v, want its SRV", recs)
		}
		a.text(t, []string{"zone", "show", "10.96.0.10"}, "10.0.96.10.in-addr.arpa.", "PTR", "web.demo.svc.cluster.local.")
	})

	t.Run("upstreams", func(t *testing.T) {
		a.ask(t, "upstreams.example.org.", dns.TypeA)
		var rows []adminapi.Upstream
		a.json(t, &rows, "upstreams")
		if len(rows) != 1 || rows[0].Addr != upAddr || !rows[0].Up || rows[0].Requests == 0 {
			t.Errorf("got %+v, want %s up with requests", rows, upAddr)
		}
		a.text(t, []string{"upstreams"}, "LAST RTT", upAddr+"  up")
	})

	t.Run("top", func(t *testing.T) {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // traffic during the sample
			defer wg.Done()
			c := &dns.Client{Timeout: time.Second}
			m := new(dns.Msg)
			m.SetQuestion("nx-top.demo.svc.cluster.local.", dns.TypeA)
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _, _ = c.Exchange(m, a.dns)
			}
		}()
		var v topView
		a.json(t, &v, "top", "--once", "--interval", "300ms")
		close(stop)
		wg.Wait()
		if v.QPS <= 0 || len(v.ByQueries) == 0 || v.ByQueries[0].IP != "127.0.0.1" {
			t.Errorf("got %+v, want traffic from 127.0.0.1", v)
		}
		if v.Rcodes["NXDOMAIN"] == 0 || len(v.ByNXDomain) == 0 {
			t.Errorf("got rcodes %v, by nxdomain %v, want NXDOMAINs from 127.0.0.1", v.Rcodes, v.ByNXDomain)
		}
		a.text(t, []string{"top", "--once", "--interval", "50ms"}, "queries/s", "TOP BY QUERIES", "TOP BY NXDOMAIN")
	})

	t.Run("doctor", func(t *testing.T) {
		files := map[string]string{
			"/etc/resolv.conf":             "nameserver 10.0.0.2\n",
			"/var/lib/kubelet/config.yaml": "clusterDNS: [127.0.0.1]\n",
		}
		e := &doctor.Env{
			Client:        adminapi.NewClient(a.socket),
			KubeletConfig: "/var/lib/kubelet/config.yaml", ResolvConf: "/etc/resolv.conf",
			DNSTimeout: 200 * time.Millisecond, Port: 53, InterfaceName: "nodelocaldns",
			ReadFile: func(p string) ([]byte, error) {
				if s, ok := files[p]; ok {
					return []byte(s), nil
				}
				return nil, fs.ErrNotExist
			},
			Run: func(_ context.Context, name string, _ ...string) (string, error) {
				return "", fmt.Errorf("finding %s: %w", name, exec.ErrNotFound) // no tools on this "node"
			},
		}
		found := e.Diagnose(context.Background())
		severities := func(check string) []doctor.Severity {
			var out []doctor.Severity
			for _, f := range found {
				if f.Check == check {
					out = append(out, f.Severity)
				}
			}
			return out
		}
		want := map[string]doctor.Severity{"agent": doctor.OK, "kubelet": doctor.OK, "resolv.conf": doctor.OK, "listener": doctor.OK,
			"interface": doctor.Warn, "upstream": doctor.Warn} // disabled link; a loopback upstream
		for check, sev := range want {
			got := severities(check)
			if len(got) == 0 {
				t.Errorf("%s: no finding", check)
			}
			for _, g := range got {
				if g != sev {
					t.Errorf("%s: got %s, want %s", check, g, sev)
				}
			}
		}
		if got := severities("listener"); len(got) != 2 {
			t.Errorf("listener findings: got %d, want 2 (udp and tcp)", len(got))
		}
	})
}

func hasRecord(recs []kubezone.Record, name, typ, data string) bool {
	for _, r := range recs {
		if r.Name == name && r.Type == typ && (data == "" || r.Data == data) {
			return true
		}
	}
	return false
}

// TestCLIReload checks what `nodecache reload` and `status` print for an
// applied reload and for a refused one, and that a refusal exits 1.
func TestCLIReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte("max-ttl: 10s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startCLIAgent(t, "--config", file, "--config-check-interval", "0s")
	if err := os.WriteFile(file, []byte("max-ttl: 20s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.text(t, []string{"reload"}, "config generation 2 is live")
	out := a.text(t, []string{"status"})
	if !regexp.MustCompile(`(?m)^config +generation 2$`).MatchString(out) {
		t.Errorf("status: got\n%s\nwant a config line with generation 2", out)
	}

	if err := os.WriteFile(file, []byte("upstream-policy: fastest\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := a.cli(t, "reload")
	if err == nil || ExitCode(err) != exitError || !strings.Contains(out, "reload refused; generation 2 keeps serving") {
		t.Errorf("refused reload: got %q, exit %d (%v); want the refusal and exit %d", out, ExitCode(err), err, exitError)
	}
	a.text(t, []string{"status"}, "generation 2; the last reload was REFUSED: ")
}

func TestCLIAgentNotRunning(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "admin.sock")
	for _, cmd := range []string{"status", "upstreams", "top"} {
		var out bytes.Buffer
		err := cliTable("dev")[cmd](context.Background(), &out, []string{"--admin-socket", sock})
		want := "cannot reach the agent at " + sock + ": is nodecache running? (connect: no such file or directory)"
		if err == nil || err.Error() != want {
			t.Errorf("%s: got error %v, want %q", cmd, err, want)
		}
		if !errors.Is(err, adminapi.ErrAgentUnreachable) {
			t.Errorf("%s: got an error not wrapping adminapi.ErrAgentUnreachable", cmd)
		}
		if got := ExitCode(err); got != exitUnreachable {
			t.Errorf("%s: got exit status %d, want %d (agent unreachable)", cmd, got, exitUnreachable)
		}
	}
}

func TestParseCLI(t *testing.T) {
	tests := []struct {
		args     []string
		min, max int
		want     string // positional args joined, or "error: substring"
		output   string
	}{
		{[]string{"web", "A", "-o", "json"}, 1, 2, "web A", "json"},
		{[]string{"-o", "json", "web"}, 1, 2, "web", "json"},
		{[]string{"web", "--admin-socket", "/x", "AAAA"}, 1, 2, "web AAAA", "text"},
		{[]string{}, 1, 2, "error: got 0 arguments, want 1 to 2", ""},
		{[]string{"-o", "xml"}, 0, 0, `error: -o "xml": want text, json or yaml`, ""},
		{[]string{"-o", "yaml"}, 0, 0, "", "yaml"},
		{[]string{"a", "b", "c"}, 1, 2, "error: got 3 arguments, want 1 to 2", ""},
		{[]string{"--bogus"}, 0, 0, "error: flag provided but not defined", ""},
	}
	for _, tt := range tests {
		var o cliOpts
		fs := newCLIFlags("t", &o)
		fs.SetOutput(&bytes.Buffer{})
		pos, err := parseCLI(fs, &o, tt.args, tt.min, tt.max)
		if e, ok := strings.CutPrefix(tt.want, "error: "); ok {
			if err == nil || !strings.Contains(err.Error(), e) {
				t.Errorf("%q: got error %v, want one containing %q", tt.args, err, e)
			}
			continue
		}
		if err != nil || strings.Join(pos, " ") != tt.want || o.output != tt.output {
			t.Errorf("%q: got %q, -o %s, err %v; want %q, -o %s", tt.args, pos, o.output, err, tt.want, tt.output)
		}
	}
	var o cliOpts
	fs := newCLIFlags("t", &o)
	fs.SetOutput(&bytes.Buffer{})
	if _, err := parseCLI(fs, &o, []string{"-h"}, 0, 0); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: got %v, want flag.ErrHelp", err)
	}
}

func TestExitCodes(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{flag.ErrHelp, exitOK},
		{usageErrorf("cache flush: want a name"), exitUsage},
		{fmt.Errorf("top: %w", &adminapi.AgentError{Socket: "/x", Cause: errors.New("connect: refused")}), exitUnreachable},
		{fmt.Errorf("doctor: 2 checks failed: %w", errFindings), exitDoctorFail},
		{fmt.Errorf("doctor: 1 checks warned: %w", errWarnings), exitDoctorWarn},
		{errors.New("the agent answered 502"), exitError},
	} {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("ExitCode(%v): got %d, want %d", tt.err, got, tt.want)
		}
	}
	// Main's own usage errors.
	for _, args := range [][]string{{}, {"bogus"}, {"cache", "flush"}, {"tail", "--min-latency", "x"}, {"tail", "--rcode", "BOGUS"}} {
		if got := ExitCode(Main(args, "dev")); got != exitUsage {
			t.Errorf("nodecache %q: got exit status %d, want %d", args, got, exitUsage)
		}
	}
}
