//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	linkLocalIP   = "169.254.20.10"
	clusterDomain = "cluster.local"
	healthAddr    = "127.0.0.1:8081" // inside the node netns
	metricsAddr   = "127.0.0.1:9253" // inside the node netns
)

// agentBuild builds the nodecache binary once per test binary (or takes
// $NODECACHE_E2E_AGENT).
var agentBuild = sync.OnceValues(func() (string, error) {
	if p := os.Getenv("NODECACHE_E2E_AGENT"); p != "" {
		return p, nil
	}
	bin := filepath.Join(env.workDir, "nodecache")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/nodecache").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/nodecache: %w\n%s", err, out)
	}
	return bin, nil
})

// agentOpts are the knobs of one agent run; the zero value is a default
// node-local agent on linkLocalIP.
type agentOpts struct {
	NodeName string   // empty: "node-1"
	Flags    []string // extra flags, appended last (they win)
	// APIDown starts the agent with its path to the apiserver cut
	// (runningAgent.API.Resume restores it) and waits for /healthz only.
	APIDown bool
}

// runningAgent is the nodecache binary running inside a node netns.
type runningAgent struct {
	Node    *netNS
	LocalIP string
	API     *tcpForwarder // the agent's only way to the apiserver
	proc    *proc
	http    *http.Client // dials inside Node
}

// startAgent runs nodecache in node with the agent identity, forwarding
// misses to up, and waits until /readyz answers 200. Cleanup stops it (a
// non-zero exit fails the test) and prints its log if the test failed.
func startAgent(t testing.TB, node *netNS, up *dnsUpstream, o agentOpts) *runningAgent {
	t.Helper()
	bin, err := agentBuild()
	if err != nil {
		t.Fatal(err)
	}
	if o.NodeName == "" {
		o.NodeName = "node-1"
	}
	// The admin and handover sockets live in the host's file system, shared
	// by every agent: each run gets its own, or one agent would hand its
	// listeners to the next. Unix socket paths are short: not t.TempDir().
	sockDir, err := os.MkdirTemp("", "nc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	fwd := forwardTCP(t, node, strings.TrimPrefix(env.api.URL, "https://"))
	if o.APIDown {
		fwd.Pause()
	}
	kubeconfig := agentKubeconfig(t, "https://"+fwd.Addr())
	args := []string{"netns", "exec", node.Name, bin, "run",
		"--local-ip=" + linkLocalIP, "--port=53", "--upstream=" + up.Addr,
		"--setup-interface=true", "--setup-iptables=true", "--iptables-mode=auto",
		"--interface-name=nodelocaldns", "--cluster-domain=" + clusterDomain,
		"--kubeconfig=" + kubeconfig, "--node-name=" + o.NodeName,
		"--metrics-addr=" + metricsAddr, "--health-addr=" + healthAddr,
		"--ttl=5s", "--negative-ttl=5s", "--log-level=debug",
		"--admin-socket=" + filepath.Join(sockDir, "admin.sock"),
		"--handover-socket=" + filepath.Join(sockDir, "handover.sock")}
	args = append(args, o.Flags...)
	logPath := filepath.Join(t.TempDir(), "agent.log")
	p, err := startProc("nodecache", logPath, append([]string{"ip"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	a := &runningAgent{Node: node, LocalIP: linkLocalIP, API: fwd, proc: p, http: nsHTTPClient(node)}
	t.Cleanup(func() {
		if err := p.Stop(15 * time.Second); err != nil {
			t.Errorf("stopping the agent: got %v, want a clean exit on SIGTERM", err)
		}
		if t.Failed() {
			t.Logf("agent log (%s):\n%s", strings.Join(args[3:], " "), p.logTail(16000))
		}
	})
	path := "/readyz"
	if o.APIDown {
		path = "/healthz"
	}
	d := a.waitHTTP(t, path)
	t.Logf("agent %s OK in %v", path, d.Round(time.Millisecond))
	return a
}

// waitHTTP polls the agent's health listener until path answers 200 and
// returns how long that took; it fails the test after 60s.
func (a *runningAgent) waitHTTP(t testing.TB, path string) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	err := poll(ctx, 50*time.Millisecond, a.proc, func(ctx context.Context) error {
		return httpOK(ctx, a.http, "http://"+healthAddr+path, "")
	})
	if err != nil {
		t.Fatalf("waiting for the agent's %s: %v", path, err)
	}
	return time.Since(start)
}

// nsHTTPClient is an HTTP client whose connections are opened inside ns.
func nsHTTPClient(ns *netNS) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: ns.dial, DisableKeepAlives: true}}
}

// stop stops the agent now (SIGTERM) and fails t unless it exits cleanly.
func (a *runningAgent) stop(t testing.TB) {
	t.Helper()
	if err := a.proc.Stop(15 * time.Second); err != nil {
		t.Errorf("stopping the agent: got %v, want a clean exit on SIGTERM", err)
	}
}

// metrics returns the agent's /metrics text.
func (a *runningAgent) metrics(t testing.TB) string {
	t.Helper()
	resp, err := a.http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("getting agent metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading agent metrics: %v", err)
	}
	return string(b)
}
