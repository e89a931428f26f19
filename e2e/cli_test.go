//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cli runs `nodecache ARGS --admin-socket=<a's>` inside a's node netns, as
// an operator on the node would, and returns its stdout; err is its exit
// status (stderr is in the error).
func (a *runningAgent) cli(t testing.TB, args ...string) (string, error) {
	t.Helper()
	bin, err := agentBuild()
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"netns", "exec", a.Node.Name, bin}, args...)
	argv = append(argv, "--admin-socket="+a.flag(t, "admin-socket"))
	cmd := exec.CommandContext(t.Context(), "ip", argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.Join(err, errors.New(strings.TrimSpace(stderr.String())))
	}
	return stdout.String(), nil
}

// cliJSON runs `nodecache ARGS -o json` and decodes its output into v; any
// failure fails t.
func (a *runningAgent) cliJSON(t testing.TB, v any, args ...string) {
	t.Helper()
	out, err := a.cli(t, append(args, "-o", "json")...)
	if err != nil {
		t.Fatalf("nodecache %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("nodecache %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// get fetches path from the agent's HTTP listener addr (inside its netns).
func (a *runningAgent) get(t testing.TB, addr, path string) (int, string) {
	t.Helper()
	resp, err := a.http.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// metricSum is the sum of every sample of the metric name in a /metrics
// text, over all label sets.
func metricSum(t testing.TB, text, name string) float64 {
	t.Helper()
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// requests is the agent's nodecache_server_requests_total, all labels.
func (a *runningAgent) requests(t testing.TB) float64 {
	t.Helper()
	return metricSum(t, a.metrics(t), "nodecache_server_requests_total")
}

// The parts of the CLI's JSON the tests look at.
type (
	cliStatus struct {
		Serving   bool     `json:"serving"`
		NotReady  []string `json:"not_ready"`
		Interface struct {
			Interface struct {
				Name, State, Kind string
				Present, Up       bool
			}
			Rules struct{ State, Backend string }
		} `json:"interface"`
		Zone *struct {
			Synced   bool
			Source   string
			Services int
		} `json:"zone"`
	}
	cliQuery struct {
		Rcode  string   `json:"rcode"`
		Source string   `json:"source"`
		Server string   `json:"server"`
		Answer []string `json:"answer"`
		Flags  string   `json:"flags"`
	}
	cliCacheEntry struct {
		Name string
		Type uint16
		Kind string
	}
	cliRecord  struct{ Name, Type, Data string }
	cliFinding struct {
		Check    string `json:"check"`
		Severity string `json:"severity"`
		Detail   string `json:"detail"`
	}
)

// writeFile writes body to name in a temp dir and returns the path.
func writeFile(t testing.TB, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// doctor runs `nodecache doctor -o json` with resolvConf and returns its
// findings and exit error.
func (a *runningAgent) doctor(t testing.TB, resolvConf string) ([]cliFinding, error) {
	t.Helper()
	out, err := a.cli(t, "doctor", "-o", "json", "--resolv-conf", resolvConf, "--kubelet-config", "/nonexistent/kubelet.yaml")
	var fs []cliFinding
	if jerr := json.Unmarshal([]byte(out), &fs); jerr != nil {
		t.Fatalf("doctor -o json: %v (exit %v)\n%s", jerr, err, out)
	}
	return fs, err
}

// exitStatus is the CLI's exit status in err: 0 for nil, -1 when it did
// not exit by itself.
func exitStatus(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

func failing(fs []cliFinding) map[string][]string {
	out := map[string][]string{}
	for _, f := range fs {
		if f.Severity == "FAIL" {
			out[f.Check] = append(out[f.Check], f.Detail)
		}
	}
	return out
}

// awaitDigs runs dig from p for about d in the background; the returned
// function waits for it and returns how many answers came back.
func awaitDigs(p *pod, name string, d time.Duration) func() int {
	done := make(chan int, 1)
	go func() {
		n := 0
		for end := time.Now().Add(d); time.Now().Before(end); {
			if _, err := runQuery(context.Background(), p.NS, query{Server: linkLocalIP, Name: name}); err == nil {
				n++
			}
			time.Sleep(20 * time.Millisecond)
		}
		done <- n
	}()
	return func() int { return <-done }
}

// TestCLIEndToEnd runs every troubleshooting command against a live agent
// in the node netns and checks its JSON against what the test did: status,
// query (zone, upstream then cache), cache dump and flush, zone list,
// upstreams, top, explain (its query count against what glibc really sent)
// and doctor on a healthy node, with a forwarding loop in resolv.conf, and
// with a rule deleted by hand (the agent's --sync-interval is 1h so it does
// not repair it first).
func TestCLIEndToEnd(t *testing.T) {
	requireSuite(t)
	r := newAgentRig(t, agentOpts{Flags: []string{"--sync-interval=1h"}})
	a := r.agent
	ns := newNamespace(t, "cli")
	fqdn, ips := webService(t, r, ns)

	var st cliStatus
	a.cliJSON(t, &st, "status")
	if !st.Serving || len(st.NotReady) > 0 || st.Zone == nil || !st.Zone.Synced || st.Zone.Source != "api" {
		t.Errorf("status: got serving %v, not ready %v, zone %+v; want serving, ready, zone synced from api", st.Serving, st.NotReady, st.Zone)
	}
	if i := st.Interface.Interface; !i.Present || !i.Up || i.Name != "nodelocaldns" || i.State != "ok" {
		t.Errorf("status interface: got %+v, want nodelocaldns present, up, ok", i)
	}
	if st.Interface.Rules.State != "ok" {
		t.Errorf("status rules: got %+v, want state ok", st.Interface.Rules)
	}

	var q cliQuery
	a.cliJSON(t, &q, "query", fqdn)
	if q.Rcode != "NOERROR" || q.Source != "zone" || !strings.Contains(strings.Join(q.Answer, "\n"), ips[0]) || !strings.Contains(q.Flags, "aa") {
		t.Errorf("query %s: got %+v, want NOERROR from zone with %s and aa", fqdn, q, ips[0])
	}
	for i, want := range []string{"upstream", "cache"} {
		a.cliJSON(t, &q, "query", "www.example.com", "A")
		if q.Rcode != "NOERROR" || q.Source != want || !strings.Contains(strings.Join(q.Answer, "\n"), "192.0.2.10") {
			t.Errorf("query www.example.com #%d: got %+v, want NOERROR 192.0.2.10 from %s", i+1, q, want)
		}
		if want == "upstream" && q.Server != r.up.Addr {
			t.Errorf("query www.example.com server: got %q, want %q", q.Server, r.up.Addr)
		}
	}

	var dump []cliCacheEntry
	a.cliJSON(t, &dump, "cache", "dump")
	if !containsEntry(dump, "www.example.com.", 1) {
		t.Errorf("cache dump: got %+v, want www.example.com. A among the entries", dump)
	}
	var flushed struct{ Flushed int }
	a.cliJSON(t, &flushed, "cache", "flush", "--all")
	if flushed.Flushed < 1 {
		t.Errorf("cache flush: got %d entries flushed, want at least 1", flushed.Flushed)
	}
	a.cliJSON(t, &dump, "cache", "dump")
	if containsEntry(dump, "www.example.com.", 1) {
		t.Errorf("cache dump after flush: got %+v, want no www.example.com.", dump)
	}

	var recs []cliRecord
	a.cliJSON(t, &recs, "zone", "list", "--namespace", ns)
	for _, want := range []cliRecord{{fqdn, "A", ips[0]}, {fqdn, "AAAA", ips[1]}} {
		if !containsRecord(recs, want) {
			t.Errorf("zone list --namespace %s: got %+v, want %+v among them", ns, recs, want)
		}
	}

	var ups []struct {
		Addr     string `json:"addr"`
		Up       bool   `json:"up"`
		Requests uint64 `json:"requests"`
	}
	a.cliJSON(t, &ups, "upstreams")
	if len(ups) != 1 || ups[0].Addr != r.up.Addr || !ups[0].Up || ups[0].Requests < 1 {
		t.Errorf("upstreams: got %+v, want one, %s, up, with requests", ups, r.up.Addr)
	}

	wait := awaitDigs(r.pod, fqdn, 2*time.Second)
	var top struct {
		QPS       float64 `json:"qps"`
		ByQueries []struct {
			IP  string  `json:"ip"`
			QPS float64 `json:"qps"`
		} `json:"top_by_queries"`
	}
	a.cliJSON(t, &top, "top", "--once", "--interval=1s")
	if n := wait(); n == 0 {
		t.Fatalf("dig during top: got no answers, want some")
	}
	if top.QPS <= 0 || len(top.ByQueries) == 0 || top.ByQueries[0].IP != r.pod.IP {
		t.Errorf("top --once: got %+v, want qps > 0 and the pod %s first", top, r.pod.IP)
	}
	t.Logf("top --once while a pod digs in a loop: %.1f qps, top client %+v", top.QPS, top.ByQueries)

	checkExplain(t, r, ns)
	checkDoctor(t, r, st.Interface.Rules.Backend)
}

func containsEntry(es []cliCacheEntry, name string, typ uint16) bool {
	for _, e := range es {
		if e.Name == name && e.Type == typ {
			return true
		}
	}
	return false
}

func containsRecord(rs []cliRecord, want cliRecord) bool {
	for _, r := range rs {
		if strings.EqualFold(r.Name, want.Name) && r.Type == want.Type && r.Data == want.Data {
			return true
		}
	}
	return false
}

// checkExplain compares `nodecache explain NAME --resolv-conf` with what
// glibc (getent ahosts NAME in the pod, same resolv.conf) sent the agent.
func checkExplain(t testing.TB, r *agentRig, ns string) {
	t.Helper()
	r.pod.NS.writeResolvConf(t, linkLocalIP, ns, clusterDomain)
	conf := filepath.Join("/etc/netns", r.pod.NS.Name, "resolv.conf")
	for _, c := range []struct{ name, resolved string }{
		{"www.example.com", "www.example.com."},
		{"web", "web." + ns + ".svc." + clusterDomain + "."},
	} {
		before := r.agent.requests(t)
		addrs, err := getentAhosts(t.Context(), r.pod.NS, c.name)
		if err != nil || len(addrs) == 0 {
			t.Fatalf("getent ahosts %s: got %v, %v; want addresses", c.name, addrs, err)
		}
		sent := int(r.agent.requests(t) - before)
		var rep struct {
			Resolved string `json:"resolved"`
			Queries  int    `json:"queries"`
			Steps    []struct {
				Name    string `json:"name"`
				Outcome string `json:"outcome"`
			} `json:"steps"`
		}
		r.agent.cliJSON(t, &rep, "explain", c.name, "--resolv-conf", conf)
		if rep.Resolved != c.resolved || rep.Queries != sent {
			t.Errorf("explain %s: got resolved %q after %d queries, want %q after %d (what glibc sent)",
				c.name, rep.Resolved, rep.Queries, c.resolved, sent)
		}
		t.Logf("explain %s: %d queries over %d names; getent ahosts sent the agent %d", c.name, rep.Queries, len(rep.Steps), sent)
	}
}

// checkDoctor runs doctor on the healthy node, with resolv.conf naming
// systemd-resolved's stub, and with one NODECACHE rule deleted.
func checkDoctor(t testing.TB, r *agentRig, backend string) {
	t.Helper()
	good := writeFile(t, "resolv.conf", "nameserver 192.0.2.1\n")
	loop := writeFile(t, "resolv-loop.conf", "nameserver 127.0.0.53\noptions edns0 trust-ad\n")
	fs, err := r.agent.doctor(t, good)
	if f, st := failing(fs), exitStatus(err); (st != 0 && st != 5) || len(f) > 0 {
		t.Errorf("doctor on a healthy node: got exit %v, FAIL %v; want exit 0 (or 5: warnings only), no FAIL\n%+v", err, f, fs)
	}
	fs, err = r.agent.doctor(t, loop)
	f := failing(fs)
	if exitStatus(err) != 4 || len(f["resolv.conf"]) == 0 || !strings.Contains(strings.Join(f["resolv.conf"], " "), "127.0.0.53") || len(f) != 1 {
		t.Errorf("doctor with nameserver 127.0.0.53: got exit %v, FAIL %v; want exit 4 and a resolv.conf FAIL only", err, f)
	}
	if backend != "nft" && backend != "legacy" {
		t.Fatalf("status rules backend: got %q, want nft or legacy", backend)
	}
	nsCommand(t, r.node, "iptables-"+backend, "-w", "-t", "raw", "-D", "NODECACHE-PREROUTING", "1")
	fs, err = r.agent.doctor(t, good)
	f = failing(fs)
	if exitStatus(err) != 4 || len(f["rules"]) == 0 || len(f["resolv.conf"]) > 0 {
		t.Errorf("doctor with a rule deleted: got exit %v, FAIL %v; want exit 4 and a rules FAIL", err, f)
	}
	t.Logf("doctor with a rule deleted: %v", f["rules"])
}
