package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/pkg/iface"
)

// `nodecache doctor` checks the node the agent runs on and says what to
// fix. It asks the agent what it knows (/v1/status, /v1/upstreams) and
// looks at the node directly: the link and rules (pkg/iface's Check), both
// iptables backends, kubelet's config, conntrack, resolv.conf, and a real
// query to every listener. Each check yields findings; any FAIL makes the
// exit status non-zero.

// Finding severities.
const (
	sevOK   = "OK"
	sevWarn = "WARN"
	sevFail = "FAIL"
	sevSkip = "SKIP" // not checked; the detail says why
)

// finding is one line of the doctor's report.
type finding struct {
	Check    string `json:"check"`
	Severity string `json:"severity"`
	Detail   string `json:"detail"`
	Fix      string `json:"fix,omitempty"`
}

// doctorEnv is what the checks look at. Tests replace the functions.
type doctorEnv struct {
	client        *adminapi.Client
	kubeletConfig string
	resolvConf    string
	dnsTimeout    time.Duration
	// fallback, used when the agent cannot say
	localIPs  []netip.Addr
	port      uint16
	ifaceName string

	readFile func(path string) ([]byte, error)
	// run runs a command and returns its stdout; an absent binary gives an
	// error wrapping exec.ErrNotFound.
	run func(ctx context.Context, name string, args ...string) (string, error)
	// inspect looks at the link and rules directly; nil skips it.
	inspect func(ctx context.Context, cfg iface.Config) (iface.Status, error)
	// coreDNS returns the coredns ConfigMap's Corefile; nil skips the check.
	coreDNS func(ctx context.Context) (string, error)

	// filled by the agent check
	st  *adminapi.Status // nil when the agent is unreachable
	ups []adminapi.Upstream
}

// cmdDoctor is `nodecache doctor`.
func cmdDoctor(ctx context.Context, out io.Writer, args []string) error {
	var o cliOpts
	var localIPs, inspect string
	var port uint
	env := &doctorEnv{readFile: os.ReadFile, run: runCommand}
	fs := newCLIFlags("doctor", &o)
	fs.StringVar(&env.kubeletConfig, "kubelet-config", "/var/lib/kubelet/config.yaml", "kubelet's KubeletConfiguration file")
	fs.StringVar(&env.resolvConf, "resolv-conf", "/etc/resolv.conf", "the node's resolv.conf")
	fs.DurationVar(&env.dnsTimeout, "timeout", 2*time.Second, "timeout of each test query to a listener")
	fs.StringVar(&localIPs, "local-ip", "169.254.20.10", "local IPs to check when the agent cannot say (comma list)")
	fs.UintVar(&port, "port", 53, "DNS port to check when the agent cannot say")
	fs.StringVar(&env.ifaceName, "interface-name", iface.DefaultInterfaceName, "link to check when the agent cannot say")
	fs.StringVar(&inspect, "inspect", "auto", "inspect link and rules directly with pkg/iface: auto (when root), always or never")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig to read the coredns ConfigMap (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
	if _, err := parseCLI(fs, &o, args, 0, 0); err != nil {
		return err
	}
	if err := (ipListFlag{&env.localIPs}).Set(localIPs); err != nil {
		return usageErrorf("doctor: --local-ip: %v", err)
	}
	if port == 0 || port > 65535 {
		return usageErrorf("doctor: --port %d: want 1 to 65535", port)
	}
	env.port = uint16(port)
	switch {
	case inspect == "always" || (inspect == "auto" && os.Geteuid() == 0):
		env.inspect = inspectKernel
	case inspect != "never" && inspect != "auto":
		return usageErrorf("doctor: --inspect %q: want auto, always or never", inspect)
	}
	env.client = adminapi.NewClient(o.socket)
	if canReachAPI(*kubeconfig) {
		env.coreDNS = readCoreDNSCorefile(*kubeconfig)
	}
	fs2 := env.diagnose(ctx)
	err := emit(out, &o, fs2, func(w io.Writer) { printFindings(w, fs2) })
	if err != nil {
		return err
	}
	if n := countSeverity(fs2, sevFail); n > 0 {
		return fmt.Errorf("doctor: %d checks failed: %w", n, errFindings)
	}
	if n := countSeverity(fs2, sevWarn); n > 0 {
		return fmt.Errorf("doctor: %d checks warned: %w", n, errWarnings)
	}
	return nil
}

// diagnose runs every check in order.
func (e *doctorEnv) diagnose(ctx context.Context) []finding {
	var all []finding
	for _, check := range []func(context.Context) []finding{
		e.checkAgent, e.checkInterface, e.checkBackend, e.checkKubelet,
		e.checkConntrack, e.checkUpstreams, e.checkListeners, e.checkCoreDNS,
	} {
		all = append(all, check(ctx)...)
	}
	return all
}

func countSeverity(fs []finding, sev string) int {
	n := 0
	for _, f := range fs {
		if f.Severity == sev {
			n++
		}
	}
	return n
}

func printFindings(w io.Writer, fs []finding) {
	for _, f := range fs {
		fmt.Fprintf(w, "%s\t%s\t%s\n", f.Severity, f.Check, f.Detail)
		if f.Fix != "" && f.Severity != sevOK {
			fmt.Fprintf(w, "\t\tfix: %s\n", f.Fix)
		}
	}
	fmt.Fprintf(w, "%d OK, %d WARN, %d FAIL", countSeverity(fs, sevOK), countSeverity(fs, sevWarn), countSeverity(fs, sevFail))
	if n := countSeverity(fs, sevSkip); n > 0 {
		fmt.Fprintf(w, ", %d not checked", n)
	}
	fmt.Fprintln(w)
}

// runCommand runs name with args and returns its standard output.
func runCommand(ctx context.Context, name string, args ...string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("finding %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("running %s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// inspectKernel is pkg/iface's read-only Check with the agent's settings.
func inspectKernel(ctx context.Context, cfg iface.Config) (iface.Status, error) {
	m, err := iface.New(cfg, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		return iface.Status{}, err
	}
	defer m.Close()
	st, err := m.Check(ctx)
	if errors.Is(err, iface.ErrNotConverged) {
		return st, nil // the status says what differs
	}
	return st, err
}

// agentLocalIPs are the IPs and port the agent serves on, from its status,
// or the fallback flags.
func (e *doctorEnv) agentLocalIPs() ([]netip.Addr, uint16) {
	if e.st == nil {
		return e.localIPs, e.port
	}
	var ips []netip.Addr
	port := e.port
	for _, s := range strings.Split(e.st.Config["local-ip"], ",") {
		if ap, err := netip.ParseAddrPort(strings.TrimSpace(s)); err == nil {
			ips = append(ips, ap.Addr())
			port = ap.Port()
		}
	}
	if len(ips) == 0 {
		return e.localIPs, e.port
	}
	return ips, port
}

// isLocalIP reports whether ip is one the agent serves on.
func (e *doctorEnv) isLocalIP(ip netip.Addr) bool {
	ips, _ := e.agentLocalIPs()
	for _, l := range ips {
		if l == ip.Unmap() {
			return true
		}
	}
	return false
}
