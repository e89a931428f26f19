package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/internal/agent/agenttest"
)

// TestLiveReload changes the --config file under a running agent: a
// valid config is applied (upstream, static records, TTL cap) by
// `nodecache reload` and by the file watch, an invalid one is refused
// whole while the old one keeps serving, and a client querying all along
// loses no query.
func TestLiveReload(t *testing.T) {
	upA, upB := startUpstream(t), startUpstream(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	writeConfig := func(body string) { // atomically, as a ConfigMap volume swaps its files
		t.Helper()
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig(fmt.Sprintf("upstream: '%s'\nstatic-record: ['10.0.0.1 static.example.internal']\n", upA.Addr))
	port := freePort(t)
	cfg := testAgentConfig(t, upA.Addr, dir, port, "--config", file, "--config-check-interval", "20ms")
	// testAgentConfig's --upstream flag would win over the file; drop it.
	cfg, err := ParseConfig(agenttest.WithoutFlag(cfg.args, "--upstream"))
	if err != nil {
		t.Fatal(err)
	}
	ta := startAgent(t, cfg)
	a := ta.agent()
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	// A client that asks all along; every answer must be NOERROR.
	ctx, stop := context.WithCancel(context.Background())
	var lost atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := &dns.Client{Timeout: 2 * time.Second}
		for i := 0; ctx.Err() == nil; i++ {
			m := new(dns.Msg)
			m.SetQuestion(fmt.Sprintf("load%d.example.org.", i), dns.TypeA)
			if r, _, err := c.Exchange(m, addr); err != nil || r.Rcode != dns.RcodeSuccess {
				lost.Add(1)
			}
		}
	}()

	if r := ask(t, addr, "static.example.internal.", dns.TypeA); len(r.Answer) != 1 {
		t.Fatalf("static record before reload: got %v", r)
	}
	writeConfig(fmt.Sprintf("upstream: '%s'\nstatic-record: ['10.0.0.2 static.example.internal']\nmax-ttl: 20s\n", upB.Addr))
	rep, err := adminapi.NewClient(cfg.AdminSocket).Reload(context.Background())
	if err != nil || rep.Error != "" || rep.Generation < 2 || a.live.gen.Load() < 2 {
		t.Fatalf("reload over the admin API: got %+v %v, want a new generation live", rep, err)
	}
	before := upB.Queries.Load()
	r := ask(t, addr, "after-reload.example.org.", dns.TypeA)
	if upB.Queries.Load() == before || len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 20 {
		t.Errorf("after reload: got %v (upstream B asked %d times), want the new upstream and TTL 20", r, upB.Queries.Load()-before)
	}
	if r := ask(t, addr, "static.example.internal.", dns.TypeA); len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.0.0.2" {
		t.Errorf("static record after reload: got %v, want 10.0.0.2", r.Answer)
	}

	gen := a.live.gen.Load()
	writeConfig("upstream: 'not-an-address'\n")
	agenttest.WaitFor(t, "the broken config to be refused", func() bool { return testutil.ToFloat64(a.live.reloads.WithLabelValues("refused")) == 1 })
	if st := a.status(); st.ConfigGeneration != gen || st.ConfigError == "" {
		t.Errorf("after a broken config: got generation %d, error %q; want %d and the reason", st.ConfigGeneration, st.ConfigError, gen)
	}
	before = upB.Queries.Load()
	ask(t, addr, "still-b.example.org.", dns.TypeA)
	if upB.Queries.Load() == before {
		t.Error("after a broken config: the previous upstream was not asked")
	}

	writeConfig(fmt.Sprintf("upstream: '%s'\n", upA.Addr))
	agenttest.WaitFor(t, "the fixed config to be applied by the watch", func() bool { return a.live.gen.Load() == gen+1 })
	if st := a.status(); st.ConfigError != "" {
		t.Errorf("after a good config: got error %q, want none", st.ConfigError)
	}
	if r := ask(t, addr, "static.example.internal.", dns.TypeA); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.7" {
		t.Errorf("static record removed: got %v, want the upstream's answer", r.Answer)
	}
	stop()
	wg.Wait()
	if n := lost.Load(); n != 0 {
		t.Errorf("got %d queries lost or failed across the reloads, want 0", n)
	}
}

// TestReloadOnSIGHUP checks that a SIGHUP applies a changed config at
// once when the file watch is off, that status shows the generation, and
// that the admin API's reload reports a refusal (the CLI's printing of it
// is tested with the CLI).
func TestReloadOnSIGHUP(t *testing.T) {
	upA, upB := startUpstream(t), startUpstream(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf("upstream: '%s'\n", upA.Addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cfg := testAgentConfig(t, upA.Addr, dir, port, "--config", file, "--config-check-interval", "0s")
	cfg, err := ParseConfig(agenttest.WithoutFlag(cfg.args, "--upstream"))
	if err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, cfg).agent()
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.watchConfig(ctx, hup) }() // as Main wires signal.Notify
	t.Cleanup(func() { cancel(); <-done })

	if err := os.WriteFile(file, []byte(fmt.Sprintf("upstream: '%s'\n", upB.Addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	hup <- syscall.SIGHUP
	agenttest.WaitFor(t, "SIGHUP to apply the config", func() bool { return a.live.gen.Load() == 2 })
	before := upB.Queries.Load()
	ask(t, fmt.Sprintf("127.0.0.1:%d", port), "after-hup.example.org.", dns.TypeA)
	if upB.Queries.Load() == before {
		t.Error("after SIGHUP: the new upstream was not asked")
	}
	if st := a.status(); st.ConfigGeneration != 2 {
		t.Errorf("status: got config generation %d, want 2", st.ConfigGeneration)
	}

	if err := os.WriteFile(file, []byte("upstream-policy: fastest\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := adminapi.NewClient(cfg.AdminSocket).Reload(context.Background())
	if err != nil || rep.Error == "" || rep.Generation != 2 {
		t.Errorf("refused reload: got %+v %v; want the refusal, generation 2 serving", rep, err)
	}
}

// TestKubeDNSConfigMapErrorCounted: a kube-dns ConfigMap the agent cannot
// apply is counted as node-cache counts it,
// coredns_nodecache_setup_errors_total{errortype="configmap"}.
func TestKubeDNSConfigMapErrorCounted(t *testing.T) {
	up := startUpstream(t)
	dir := t.TempDir()
	kubeDNS := filepath.Join(dir, "kube-dns")
	if err := os.Mkdir(kubeDNS, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := testAgentConfig(t, up.Addr, dir, freePort(t), "--kube-dns-config-dir", kubeDNS)
	a := startAgent(t, cfg).agent()
	if err := os.WriteFile(filepath.Join(kubeDNS, "stubDomains"), []byte(`{"example.internal": ["not-an-ip"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := a.reload("test"); err == nil {
		t.Fatal("reload with a broken kube-dns ConfigMap: got nil, want it refused")
	}
	got := testutil.ToFloat64(a.iface.SetupErrors("configmap"))
	if got != 1 {
		t.Errorf(`coredns_nodecache_setup_errors_total{errortype="configmap"}: got %v, want 1`, got)
	}
}
