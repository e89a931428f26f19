//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodecache/nodecache/internal/testnet"
)

const (
	linkLocalIP   = "169.254.20.10"
	clusterDomain = "cluster.local"
	healthAddr    = "127.0.0.1:8081" // inside the node netns
	metricsAddr   = "127.0.0.1:9253" // inside the node netns
)

// agentBuild builds the nodecache binary and, beside it, the supervisor's
// (which `nodecache run` execs from there, as in the image) once per test
// binary, or takes $NODECACHE_E2E_AGENT (with whatever sits beside it).
var agentBuild = sync.OnceValues(func() (string, error) {
	if p := os.Getenv("NODECACHE_E2E_AGENT"); p != "" {
		return p, nil
	}
	bin := filepath.Join(env.workDir, "nodecache")
	// Static, as the image is: the real node's image build then reuses
	// this compile.
	for _, pkg := range []string{"nodecache", "nodecache-supervisor"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(env.workDir, pkg), "../cmd/"+pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go build ./cmd/%s: %w\n%s", pkg, err, out)
		}
	}
	return bin, nil
})

// agentOpts are the knobs of one agent run; the zero value is a default
// node-local agent on linkLocalIP.
type agentOpts struct {
	NodeName string // empty: "node-1"
	// ExtraLocalIPs are served besides linkLocalIP, e.g. the kube-dns
	// ClusterIP to intercept it as NodeLocal DNSCache does.
	ExtraLocalIPs []string
	Flags         []string // extra flags, appended last (they win)
	// APIDown starts the agent with its path to the apiserver cut
	// (runningAgent.API.Resume restores it) and waits for /healthz only.
	APIDown bool
	// PodAccess runs the agent with the pod-access grant (env.podAgent)
	// and --watch-pods; the default is the base grant, which lists no pod.
	PodAccess bool
	// MemoryCgroup is a cgroup v1 memory directory to start the agent in
	// (its supervisor and so its serving process); empty: the test's own.
	MemoryCgroup string
}

// localIPs is linkLocalIP and then ExtraLocalIPs.
func (o agentOpts) localIPs() []string { return append([]string{linkLocalIP}, o.ExtraLocalIPs...) }

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
	id := env.agent
	if o.PodAccess {
		id = env.podAgent
		o.Flags = append([]string{"--watch-pods"}, o.Flags...)
	}
	kubeconfig := agentKubeconfig(t, id, "https://"+fwd.Addr())
	args := []string{"netns", "exec", node.Name, bin, "run",
		"--local-ip=" + strings.Join(o.localIPs(), ","), "--port=53", "--upstream=" + up.Addr,
		"--setup-interface=true", "--setup-iptables=true", "--iptables-mode=auto",
		"--interface-name=nodelocaldns", "--cluster-domain=" + clusterDomain,
		"--kubeconfig=" + kubeconfig, "--node-name=" + o.NodeName,
		"--metrics-addr=" + metricsAddr, "--health-addr=" + healthAddr,
		"--ttl=5s", "--negative-ttl=5s", "--log-level=debug",
		"--admin-socket=" + filepath.Join(sockDir, "admin.sock"),
		"--handover-socket=" + filepath.Join(sockDir, "handover.sock")}
	args = append(args, o.Flags...)
	logPath := filepath.Join(t.TempDir(), "agent.log")
	argv := append([]string{"ip"}, args...)
	if o.MemoryCgroup != "" {
		// ip netns exec mounts a sysfs of the netns over /sys, hiding the
		// cgroup mounts: mount the memory hierarchy again inside, as a
		// container runtime does, so the agent sees its limit.
		const mountCgroup = `mount -t tmpfs cgroup /sys/fs/cgroup && mkdir -p /sys/fs/cgroup/memory && ` +
			`mount -t cgroup -o memory cgroup /sys/fs/cgroup/memory && exec "$@"`
		argv = slices.Concat([]string{"sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, o.MemoryCgroup, "ip"},
			args[:3], []string{"sh", "-c", mountCgroup, "sh"}, args[3:])
	}
	p, err := startProc("nodecache", logPath, argv...)
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

// proc is a child process whose stdout and stderr go to one log file. Stop
// sends SIGTERM, waits, then SIGKILLs; it is idempotent.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has been reaped

	mu      sync.Mutex // guards following
	waitErr error
	stopped bool
}

// startProc starts argv with its output appended to logPath.
func startProc(name, logPath string, argv ...string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening log for %s: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	// Die with the test binary even if it is killed before Stop runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		_ = logf.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process is gone, and how it ended.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Stop terminates the process and waits for it; a process that was already
// stopped returns nil. The error is the exit status unless it was our signal.
func (p *proc) Stop(grace time.Duration) error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil
	}
	p.stopped = true
	p.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %v of SIGTERM; killed", p.name, grace)
	}
	_, err := p.exited()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ProcessState != nil {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return nil
		}
	}
	return err
}

// logTail returns at most the last n bytes of the process log.
func (p *proc) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", p.logPath, err)
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// freePort returns a loopback port, free for TCP and UDP, that no other
// test in this process gets (see testnet.FreePort).
func freePort() (int, error) {
	p, err := testnet.FreePort()
	return int(p), err
}

// poll calls check every interval until it returns nil, ctx ends, or the
// process dies. It returns the last error from check.
func poll(ctx context.Context, interval time.Duration, p *proc, check func(context.Context) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	var err error
	for {
		cerr := check(ctx)
		if cerr == nil {
			return nil
		}
		if err == nil || ctx.Err() == nil {
			err = cerr // keep a real failure over the deadline cutting the last try
		}
		if p != nil {
			if gone, werr := p.exited(); gone {
				return fmt.Errorf("%s exited (%v) while waiting: %w", p.name, werr, err) //nolint:errorlint // the wait failed; the exit status (maybe nil) is context
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}
