//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// answer is what a DNS client printed, parsed.
type answer struct {
	Rcode  string   // from the header line: NOERROR, NXDOMAIN, SERVFAIL, ...
	Flags  []string // header flags: qr, aa, rd, ra, ...
	Answer []dns.RR // the answer section
	Raw    string   // the client's full output
}

// Data returns the rdata of every answer record of type t, sorted, e.g.
// ["10.96.0.12"] for A.
func (a answer) Data(t uint16) []string {
	var out []string
	for _, rr := range a.Answer {
		if rr.Header().Rrtype != t {
			continue
		}
		s := rr.String()
		s = strings.TrimPrefix(s, rr.Header().String())
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// String is a short form for messages: "NOERROR [10.96.0.12]".
func (a answer) String() string {
	var recs []string
	for _, rr := range a.Answer {
		recs = append(recs, strings.TrimPrefix(rr.String(), rr.Header().Name+"\t"))
	}
	return fmt.Sprintf("%s %v", a.Rcode, recs)
}

var (
	// dig: ";; ->>HEADER<<- opcode: QUERY, status: NOERROR, id: 1"
	// kdig: ";; ->>HEADER<<- opcode: QUERY; status: NOERROR; id: 1"
	statusRe = regexp.MustCompile(`->>HEADER<<- opcode: \w+[,;] status: ([A-Z]+)`)
	// dig: ";; flags: qr aa rd ra; QUERY: ..."; kdig: ";; Flags: qr aa rd ra; QUERY: ..."
	flagsRe = regexp.MustCompile(`(?i);; flags: ([a-z ]*);`)
)

// parseDigOutput parses the output of dig or kdig run with +noall +comments
// +answer (kdig: +noall +header +answer).
func parseDigOutput(out string) (answer, error) {
	a := answer{Raw: out}
	m := statusRe.FindStringSubmatch(out)
	if m == nil {
		return a, fmt.Errorf("no header line in client output:\n%s", out)
	}
	a.Rcode = m[1]
	if f := flagsRe.FindStringSubmatch(out); f != nil {
		a.Flags = strings.Fields(f[1])
	}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, ";") {
			continue
		}
		rr, err := dns.NewRR(line)
		if err != nil {
			return a, fmt.Errorf("parsing answer line %q: %w", line, err)
		}
		if rr != nil {
			a.Answer = append(a.Answer, rr)
		}
	}
	return a, nil
}

// query describes one client run.
type query struct {
	Tool   string // "dig" (default) or "kdig"
	Server string // IP of the server
	Port   string // empty: 53
	Name   string
	Type   string // "A" by default
	TCP    bool
}

// args is the command line for q.
func (q query) args() []string {
	typ := q.Type
	if typ == "" {
		typ = "A"
	}
	var a []string
	switch q.Tool {
	case "kdig":
		a = []string{"kdig", "@" + q.Server, "+noall", "+header", "+answer", "+time=2", "+retry=0"}
	default:
		a = []string{"dig", "@" + q.Server, "+noall", "+comments", "+answer", "+time=2", "+tries=1"}
	}
	if q.Port != "" {
		a = append(a, "-p", q.Port)
	}
	if q.TCP {
		a = append(a, "+tcp")
	}
	return append(a, q.Name, typ)
}

// dnsType maps a type mnemonic ("" is A) to its code.
func dnsType(t testing.TB, s string) uint16 {
	t.Helper()
	if s == "" {
		return dns.TypeA
	}
	qt, ok := dns.StringToType[s]
	if !ok {
		t.Fatalf("unknown DNS type %q", s)
	}
	return qt
}

// runQuery runs q inside ns via `ip netns exec` and parses the answer. A
// client that gets no reply returns an error.
func runQuery(ctx context.Context, ns *netNS, q query) (answer, error) {
	argv := append([]string{"netns", "exec", ns.Name}, q.args()...)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, "ip", argv...).CombinedOutput()
	if err != nil {
		return answer{Raw: string(out)}, fmt.Errorf("ip %s: %w: %s", strings.Join(argv, " "), err, out)
	}
	return parseDigOutput(string(out))
}

// mustQuery is runQuery failing the test on error.
func mustQuery(t testing.TB, ns *netNS, q query) answer {
	t.Helper()
	a, err := runQuery(t.Context(), ns, q)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// getentAhosts runs the glibc resolver (getent ahosts name) inside ns with
// its /etc/netns resolv.conf and returns the distinct addresses, sorted. A
// name that does not resolve returns (nil, nil): getent exits 2.
func getentAhosts(ctx context.Context, ns *netNS, name string) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, "ip", "netns", "exec", ns.Name, "getent", "ahosts", name).CombinedOutput()
	var ee *exec.ExitError
	if err != nil && errors.As(err, &ee) && ee.ExitCode() == 2 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("getent ahosts %s in %s: %w: %s", name, ns.Name, err, out)
	}
	var ips []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && !slices.Contains(ips, f[0]) {
			ips = append(ips, f[0])
		}
	}
	slices.Sort(ips)
	return ips, nil
}
