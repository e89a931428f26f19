package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"time"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/pkg/corefile"
	"github.com/nodecache/nodecache/pkg/iface"
)

// Severity is how bad a finding is.
type Severity string

// Finding severities, as printed and as in the JSON report.
const (
	OK   Severity = "OK"
	Warn Severity = "WARN"
	Fail Severity = "FAIL"
	Skip Severity = "SKIP" // not checked; the detail says why
)

// Finding is one line of the doctor's report. The JSON field names are
// part of the CLI's output (`nodecache doctor -o json`).
type Finding struct {
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	Detail   string   `json:"detail"`
	Fix      string   `json:"fix,omitempty"`
}

// AgentClient is what the checks ask the agent; *adminapi.Client is one.
type AgentClient interface {
	Status(ctx context.Context) (adminapi.Status, error)
	Upstreams(ctx context.Context) ([]adminapi.Upstream, error)
}

var _ AgentClient = (*adminapi.Client)(nil)

// Env is what the checks look at: every input is a field, so tests give
// fakes. Client, ReadFile and Run are required; the other functions may be
// nil, which skips what they do.
type Env struct {
	Client        AgentClient
	KubeletConfig string        // path of kubelet's KubeletConfiguration
	ResolvConf    string        // path of the node's resolv.conf
	DNSTimeout    time.Duration // of each test query to a listener

	// Used when the agent cannot say.
	LocalIPs      []netip.Addr
	Port          uint16
	InterfaceName string

	ReadFile func(path string) ([]byte, error)
	// Run runs a command and returns its stdout; an absent binary gives an
	// error wrapping exec.ErrNotFound (see RunCommand).
	Run func(ctx context.Context, name string, args ...string) (string, error)
	// Inspect looks at the link and rules directly (see InspectKernel);
	// nil uses what the agent saw.
	Inspect func(ctx context.Context, cfg iface.Config) (iface.Status, error)
	// LinkAddrs lists the addresses the links of this node hold; the
	// listener check queries only those. nil is the kernel's list
	// (LinkAddrs).
	LinkAddrs func() ([]netip.Addr, error)
	// CoreDNS returns the coredns ConfigMap's Corefile; nil skips the check.
	CoreDNS func(ctx context.Context) (string, error)
	// Unsupported lists what nodecache cannot reproduce of a Corefile, as
	// "coredns:LINE directive: reason" (what `nodecache migrate` reports); nil means
	// nothing is known to be lost.
	Unsupported func(cf *corefile.Corefile, clusterDomain string) ([]string, error)

	// filled by the agent check
	st  *adminapi.Status // nil when the agent is unreachable
	ups []adminapi.Upstream
}

// Diagnose runs every check in order.
func (e *Env) Diagnose(ctx context.Context) []Finding {
	var all []Finding
	for _, check := range []func(context.Context) []Finding{
		e.checkAgent, e.checkSupervisor, e.checkInterface, e.checkBackend, e.checkKubelet,
		e.checkConntrack, e.checkUpstreams, e.checkListeners, e.checkCoreDNS,
	} {
		all = append(all, check(ctx)...)
	}
	return all
}

// Count returns how many findings have severity sev.
func Count(fs []Finding, sev Severity) int {
	n := 0
	for _, f := range fs {
		if f.Severity == sev {
			n++
		}
	}
	return n
}

// Print writes one line per finding (severity, check and detail, tab
// separated, with the fix indented below each one that is not OK), then a
// line counting them.
func Print(w io.Writer, fs []Finding) {
	for _, f := range fs {
		fmt.Fprintf(w, "%s\t%s\t%s\n", f.Severity, f.Check, f.Detail)
		if f.Fix != "" && f.Severity != OK {
			fmt.Fprintf(w, "\t\tfix: %s\n", f.Fix)
		}
	}
	fmt.Fprintf(w, "%d OK, %d WARN, %d FAIL", Count(fs, OK), Count(fs, Warn), Count(fs, Fail))
	if n := Count(fs, Skip); n > 0 {
		fmt.Fprintf(w, ", %d not checked", n)
	}
	fmt.Fprintln(w)
}

// RunCommand runs name with args and returns its standard output; it is
// Env.Run on a real node.
func RunCommand(ctx context.Context, name string, args ...string) (string, error) {
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

// InspectKernel is pkg/iface's read-only Check with the agent's settings;
// it is Env.Inspect on a real node (it needs root).
func InspectKernel(ctx context.Context, cfg iface.Config) (iface.Status, error) {
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

// linkAddrs is what e.LinkAddrs, or else LinkAddrs, returns.
func (e *Env) linkAddrs() ([]netip.Addr, error) {
	if e.LinkAddrs != nil {
		return e.LinkAddrs()
	}
	return LinkAddrs()
}

// LinkAddrs lists the addresses held by the links of this network
// namespace, unmapped; it is Env.LinkAddrs on a real node.
func LinkAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing the node's addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out, nil
}

// agentLocalIPs are the IPs and port the agent serves on, from its status,
// or the fallback flags.
func (e *Env) agentLocalIPs() ([]netip.Addr, uint16) {
	if e.st == nil {
		return e.LocalIPs, e.Port
	}
	var ips []netip.Addr
	port := e.Port
	for _, s := range strings.Split(e.st.Config["local-ip"], ",") {
		if ap, err := netip.ParseAddrPort(strings.TrimSpace(s)); err == nil {
			ips = append(ips, ap.Addr())
			port = ap.Port()
		}
	}
	if len(ips) == 0 {
		return e.LocalIPs, e.Port
	}
	return ips, port
}

// isLocalIP reports whether ip is one the agent serves on.
func (e *Env) isLocalIP(ip netip.Addr) bool {
	ips, _ := e.agentLocalIPs()
	for _, l := range ips {
		if l == ip.Unmap() {
			return true
		}
	}
	return false
}
