package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/internal/testnet"
	"github.com/nodecache/nodecache/pkg/iface"
)

// fakeNode is a node's files and commands for the doctor.
type fakeNode struct {
	files map[string]string
	cmds  map[string]string // command line → stdout; absent: not installed
}

func (n fakeNode) env(t testing.TB) *Env {
	t.Helper()
	return &Env{
		Client:        adminapi.NewClient(filepath.Join(t.TempDir(), "absent.sock")),
		KubeletConfig: "/var/lib/kubelet/config.yaml", ResolvConf: "/etc/resolv.conf",
		DNSTimeout: 200 * time.Millisecond,
		LocalIPs:   []netip.Addr{netip.MustParseAddr("169.254.20.10")}, Port: 53, InterfaceName: "nodelocaldns",
		ReadFile: func(p string) ([]byte, error) {
			s, ok := n.files[p]
			if !ok {
				return nil, fmt.Errorf("open %s: %w", p, fs.ErrNotExist)
			}
			return []byte(s), nil
		},
		Run: func(_ context.Context, name string, args ...string) (string, error) {
			line := strings.Join(append([]string{name}, args...), " ")
			out, ok := n.cmds[line]
			if !ok {
				return "", fmt.Errorf("finding %s: %w", name, exec.ErrNotFound)
			}
			return out, nil
		},
	}
}

// wantOne checks that got is exactly one finding of severity want.
func wantOne(t testing.TB, got []Severity, want Severity) {
	t.Helper()
	if len(got) != 1 || got[0] != want {
		t.Errorf("got %v, want [%s]", got, want)
	}
}

// severities returns "check=SEV" for each finding of check.
func severities(fs []Finding, check string) []Severity {
	var out []Severity
	for _, f := range fs {
		if f.Check == check {
			out = append(out, f.Severity)
		}
	}
	return out
}

func TestDoctorResolvConfLoop(t *testing.T) {
	tests := []struct {
		name, resolv string
		want         []Severity
	}{
		{"systemd-resolved stub", "nameserver 127.0.0.53\noptions edns0 trust-ad\n", []Severity{Fail}},
		{"the agent itself", "nameserver 169.254.20.10\n", []Severity{Fail}},
		{"other loopback stub", "nameserver 127.0.0.1\n", []Severity{Warn}},
		{"no nameserver", "search example.com\n", []Severity{Fail}},
		{"real resolvers", "nameserver 10.0.0.2\nnameserver 10.0.0.3\n", []Severity{OK, OK}},
		{"one good, one loop", "nameserver 10.0.0.2\nnameserver 127.0.0.53\n", []Severity{OK, Fail}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := fakeNode{files: map[string]string{"/etc/resolv.conf": tt.resolv}}.env(t)
			got := severities(e.checkUpstreams(context.Background()), "resolv.conf")
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDoctorBackend(t *testing.T) {
	kube := "*filter\n:INPUT ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n-A INPUT -j KUBE-SERVICES\nCOMMIT\n"
	none := "*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n"
	tests := []struct {
		name        string
		legacy, nft *string
		ours        iface.IPTablesMode
		want        Severity
	}{
		{"same backend", &none, &kube, iface.ModeNFT, OK},
		{"kube-proxy in legacy, ours in nft", &kube, &none, iface.ModeNFT, Fail},
		{"kube-proxy in nft, ours in legacy", &none, &kube, iface.ModeLegacy, Fail},
		{"no KUBE- chains (IPVS, nftables mode)", &none, &none, iface.ModeNFT, Warn},
		{"KUBE- chains in both", &kube, &kube, iface.ModeNFT, Warn},
		{"no iptables tools", nil, nil, iface.ModeNFT, Warn},
		{"agent manages no rules", &none, &kube, iface.StateDisabled, OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := fakeNode{cmds: map[string]string{}}
			if tt.legacy != nil {
				n.cmds["iptables-legacy-save"] = *tt.legacy
			}
			if tt.nft != nil {
				n.cmds["iptables-nft-save"] = *tt.nft
			}
			e := n.env(t)
			e.st = &adminapi.Status{}
			e.st.Interface.Rules.Backend = string(tt.ours)
			wantOne(t, severities(e.checkBackend(context.Background()), "backend"), tt.want)
		})
	}
}

func TestDoctorKubelet(t *testing.T) {
	tests := []struct {
		name, config string
		want         Severity
	}{
		{"points at the link-local IP", "kind: KubeletConfiguration\nclusterDNS:\n- 169.254.20.10\n", OK},
		{"points at kube-dns, not intercepted", "clusterDNS: [10.96.0.10]\n", Warn},
		{"no clusterDNS", "kind: KubeletConfiguration\n", Warn},
		{"no file", "", Warn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := fakeNode{files: map[string]string{}}
			if tt.config != "" {
				n.files["/var/lib/kubelet/config.yaml"] = tt.config
			}
			wantOne(t, severities(n.env(t).checkKubelet(context.Background()), "kubelet"), tt.want)
		})
	}
}

func TestDoctorConntrack(t *testing.T) {
	line := "conntrack -L -f ipv4 -p udp --dport 53 -d 169.254.20.10"
	entries := "udp 17 29 src=10.244.1.5 dst=169.254.20.10 sport=40000 dport=53 src=169.254.20.10 dst=10.244.1.5 sport=53 dport=40000 mark=0 use=1\n"
	tests := []struct {
		name string
		cmds map[string]string
		want Severity
	}{
		{"no entries", map[string]string{line: ""}, OK},
		{"entries", map[string]string{line: entries + entries}, Warn},
		{"no conntrack tool", map[string]string{}, Warn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantOne(t, severities(fakeNode{cmds: tt.cmds}.env(t).checkConntrack(context.Background()), "conntrack"), tt.want)
		})
	}
}

// TestDoctorCarriesTheAgentsYield: a direct inspection sees a jump that is
// not first; the agent's status says it yielded that position on purpose.
func TestDoctorCarriesTheAgentsYield(t *testing.T) {
	c := iface.ChainStatus{Family: "ipv4", Table: "raw", Chain: "NODECACHE-PREROUTING", Exists: true, Jumps: 1}
	inspected := iface.RulesStatus{Chains: []iface.ChainStatus{c, c}}
	inspected.Chains[1].Chain = "NODECACHE-OUTPUT"
	agent := c
	agent.Yielded = true
	carryYield(&inspected, iface.RulesStatus{Chains: []iface.ChainStatus{agent}})
	if !inspected.Chains[0].Yielded || inspected.Chains[1].Yielded {
		t.Errorf("yielded after carrying: got %v, %v; want true for the agent's chain only", inspected.Chains[0].Yielded, inspected.Chains[1].Yielded)
	}
}

func TestDoctorRules(t *testing.T) {
	good := iface.ChainStatus{Family: "ipv4", Table: "raw", Chain: "NODECACHE-PREROUTING", Parent: "PREROUTING",
		Exists: true, Want: 2, Present: 2, Jumps: 1, JumpFirst: true}
	notFirst := good
	notFirst.JumpFirst = false
	yielded := notFirst
	yielded.Yielded = true
	missing := good
	missing.Present, missing.Missing = 1, 1
	tests := []struct {
		name string
		r    iface.RulesStatus
		want []Severity
	}{
		{"converged", iface.RulesStatus{State: iface.StateOK, Backend: "nft", Chains: []iface.ChainStatus{good, good}}, []Severity{OK}},
		{"jump not first", iface.RulesStatus{State: iface.StateDrift, Backend: "nft", Chains: []iface.ChainStatus{good, notFirst}}, []Severity{Fail}},
		{"jump yielded to a foreign rule", iface.RulesStatus{State: iface.StateOK, Backend: "nft", Chains: []iface.ChainStatus{good, yielded}}, []Severity{Warn}},
		{"rule missing", iface.RulesStatus{State: iface.StateDrift, Backend: "nft", Chains: []iface.ChainStatus{missing}}, []Severity{Fail}},
		{"disabled", iface.RulesStatus{State: iface.StateDisabled, Backend: "disabled"}, []Severity{Warn}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := severities(ruleFindings(tt.r, "test"), "rules")
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDoctorWithoutAgent runs every check on a node where the agent is not
// running and resolv.conf names systemd-resolved's stub: FAIL, and the
// command's error says so.
func TestDoctorWithoutAgent(t *testing.T) {
	e := fakeNode{files: map[string]string{"/etc/resolv.conf": "nameserver 127.0.0.53\n"}}.env(t)
	e.LocalIPs = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	port, err := testnet.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	e.Port = port // nobody listens: the listener check fails too
	fs := e.Diagnose(context.Background())
	for _, check := range []string{"agent", "resolv.conf", "listener"} {
		got := severities(fs, check)
		if len(got) == 0 || got[0] != Fail {
			t.Errorf("%s: got %v, want FAIL", check, got)
		}
	}
	var sb strings.Builder
	Print(&sb, fs)
	for _, want := range []string{"FAIL\tagent", "cannot reach the agent at", "is nodecache running?", "systemd-resolved", "fix: use --upstream /run/systemd/resolve/resolv.conf"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, sb.String())
		}
	}
	if _, err := e.Client.Status(context.Background()); !errors.Is(err, adminapi.ErrAgentUnreachable) {
		t.Errorf("got an error not wrapping ErrAgentUnreachable, want one")
	}
}

// TestDoctorIPVS: kube-ipvs0 holding a local IP is one WARN naming it, from a direct inspection
// as from the agent's status; nothing otherwise.
func TestDoctorIPVS(t *testing.T) {
	held := iface.Status{Interface: iface.InterfaceStatus{State: iface.StateOK, Name: "nodelocaldns", Present: true,
		Kind: "dummy", Up: true, IPVSHeld: []netip.Addr{netip.MustParseAddr("10.96.0.10")}}}
	for _, tt := range []struct {
		name   string
		direct bool
		st     iface.Status
		want   []Severity
	}{
		{"inspected, held", true, held, []Severity{Warn}},
		{"agent's status, held", false, held, []Severity{Warn}},
		{"inspected, not held", true, iface.Status{}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := fakeNode{}.env(t)
			if tt.direct {
				e.Inspect = func(context.Context, iface.Config) (iface.Status, error) { return tt.st, nil }
			} else {
				e.st = &adminapi.Status{Interface: tt.st}
			}
			fs := e.checkInterface(context.Background())
			if got := severities(fs, "ipvs"); !slices.Equal(got, tt.want) {
				t.Fatalf("ipvs findings: got %v, want %v (%+v)", got, tt.want, fs)
			}
			for _, f := range fs {
				if f.Check == "ipvs" && (!strings.Contains(f.Detail, "kube-ipvs0 holds 10.96.0.10") || !strings.Contains(f.Fix, "clusterDNS")) {
					t.Errorf("ipvs finding: got %+v, want it to name kube-ipvs0 and 10.96.0.10 and fix with clusterDNS", f)
				}
			}
		})
	}
}
