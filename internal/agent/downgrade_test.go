package agent

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nodecache/nodecache/internal/agent/agenttest"
)

// syncBuffer is a bytes.Buffer safe for the agent's goroutines.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestKubeDNSConfigMapKeepsTLSUpstreams runs an agent whose --upstream is a
// DNS over TLS server and whose kube-dns ConfigMap lists a plain
// upstreamNameservers: the plain server must not replace the TLS one. The
// agent says so in one Warn line, the downgrade gauge and its status.
func TestKubeDNSConfigMapKeepsTLSUpstreams(t *testing.T) {
	dir := t.TempDir()
	ln, caFile := agenttest.StartDoTServer(t, dir, nil, agenttest.Authoritative("192.0.2.99", false))
	plain := startUpstream(t)
	kubeDNS := t.TempDir()
	if err := os.WriteFile(filepath.Join(kubeDNS, "upstreamNameservers"), []byte(fmt.Sprintf("[%q]", plain.Addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cfg := testAgentConfig(t, plain.Addr, dir, port, "--upstream-tls-ca", caFile, "--kube-dns-config-dir", kubeDNS)
	cfg, err := ParseConfig(append(agenttest.WithoutFlag(cfg.args, "--upstream"), "--upstream", "tls://"+ln.Addr().String()+"#dns.test"))
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	a := New(cfg, slog.New(slog.NewTextHandler(&logs, nil)), "dev")
	agenttest.Start(t, cfg.HealthAddr, a.Run)
	t.Cleanup(func() { t.Log(logs.String()) })

	r := ask(t, fmt.Sprintf("127.0.0.1:%d", port), "www.example.org.", dns.TypeA)
	if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.99" || plain.Queries.Load() != 0 {
		t.Fatalf("got %v (plain server asked %d times), want the TLS server's answer", r.Answer, plain.Queries.Load())
	}
	checkDowngradeRefused(t, a, &logs, plain.Addr.String())
}

// checkDowngradeRefused checks that a says it refused the ConfigMap's
// upstreamNameservers want: a Warn line, the gauge and the status.
func checkDowngradeRefused(t testing.TB, a *Agent, logs *syncBuffer, want string) {
	t.Helper()
	var warned int
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, "upstream_nameservers="+want) {
			warned++
		}
	}
	if warned != 1 {
		t.Errorf("Warn lines naming upstream_nameservers=%s: got %d, want 1", want, warned)
	}
	if got := testutil.ToFloat64(a.m.downgrade); got != 1 {
		t.Errorf("nodecache_upstream_downgrade_refused: got %v, want 1", got)
	}
	if got := a.status().DowngradeRefused; !slices.Equal(got, []string{want}) {
		t.Errorf("status downgrade_refused: got %v, want [%s]", got, want)
	}
}

// checkRefusedUpstreams checks the ConfigMap servers upstreamConfig
// refused.
func checkRefusedUpstreams(t testing.TB, stubs stubConfig, want []netip.AddrPort) {
	t.Helper()
	if !slices.Equal(stubs.refusedUps, want) {
		t.Errorf("refused upstreamNameservers: got %v, want %v", stubs.refusedUps, want)
	}
}
