package doctor

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/pkg/corefile"
)

// TestDoctorCoreDNS checks the coredns check on real-world Corefiles:
// kubeadm's default bypasses nothing; each customisation is one warning,
// with the reason when nodecache cannot reproduce it.
func TestDoctorCoreDNS(t *testing.T) {
	read := func(name string) func(context.Context) (string, error) {
		data, err := os.ReadFile("../cli/testdata/migrate/" + name + "/Corefile")
		if err != nil {
			t.Fatal(err)
		}
		return func(context.Context) (string, error) { return string(data), nil }
	}
	tests := []struct {
		name    string
		coreDNS func(context.Context) (string, error)
		lost    []string // what Env.Unsupported reports
		want    []string // severity and a piece of the detail, per finding
	}{
		// kubeadm's loadbalance: bypassed unless the agent runs with
		// loadbalance (then nothing of kubeadm's is).
		{"kubeadm", read("kubeadm"), nil, []string{"WARN coredns:22 loadbalance: pods using nodecache bypass it"}},
		{"kubeadm, agent with loadbalance", read("kubeadm"), nil, []string{"OK only kubeadm's defaults"}},
		{"only defaults", func(context.Context) (string, error) {
			return ".:53 {\n errors\n forward . /etc/resolv.conf\n cache 30\n}\n", nil
		}, nil, []string{"OK only kubeadm's defaults"}},
		{"hosts", read("hosts-fallthrough"), nil, []string{"WARN coredns:5 hosts /etc/coredns/custom.hosts example.internal: pods using nodecache bypass it"}},
		{"stub zone", read("corporate-forward"), nil, []string{"WARN coredns:15 forward . 10.20.0.10"}},
		{"dns over tls", read("tls-upstream"), nil, []string{"WARN coredns:7 forward . tls://9.9.9.9 tls://149.112.112.112: pods using nodecache bypass it"}},
		{"not reproducible", func(context.Context) (string, error) {
			return ".:53 {\n template IN A example.test\n forward . /etc/resolv.conf\n}\n", nil
		}, []string{"coredns:2 template IN A example.test: the template plugin has no nodecache equivalent"},
			[]string{"WARN coredns:2 template IN A example.test: pods using nodecache bypass it; nodecache cannot reproduce it: the template plugin"}},
		{"no credentials", nil, nil, []string{"SKIP not checked"}},
		{"API error", func(context.Context) (string, error) { return "", errors.New("forbidden") }, nil, []string{"WARN cannot read the coredns ConfigMap: forbidden"}},
		{"bad Corefile", func(context.Context) (string, error) { return ". {", nil }, nil, []string{"WARN the coredns Corefile does not parse"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := fakeNode{}.env(t)
			if strings.Contains(tt.name, "agent with loadbalance") {
				e.st = &adminapi.Status{Config: map[string]string{"loadbalance": "true"}}
			}
			e.CoreDNS = tt.coreDNS
			e.Unsupported = func(_ *corefile.Corefile, domain string) ([]string, error) {
				if domain != "cluster.local" {
					t.Errorf("cluster domain: got %q, want cluster.local", domain)
				}
				return tt.lost, nil
			}
			got := e.checkCoreDNS(context.Background())
			if len(got) != len(tt.want) {
				t.Fatalf("got %d findings %+v, want %d", len(got), got, len(tt.want))
			}
			for i, w := range tt.want {
				sev, detail, _ := strings.Cut(w, " ")
				if string(got[i].Severity) != sev || !strings.Contains(got[i].Detail, detail) {
					t.Errorf("finding %d: got %s %q, want %s containing %q", i, got[i].Severity, got[i].Detail, sev, detail)
				}
			}
		})
	}
}

// TestDoctorCoreDNSImports: imports name files in CoreDNS's pod (AKS's
// and k3s's coredns-custom), not on the node doctor runs on; the Corefile
// still parses and is checked without them.
func TestDoctorCoreDNSImports(t *testing.T) {
	e := fakeNode{}.env(t)
	e.CoreDNS = func(context.Context) (string, error) {
		return ".:53 {\n forward . /etc/resolv.conf\n import /nonexistent/custom/extra.override\n}\nimport /nonexistent/custom/extra.server\n", nil
	}
	e.Unsupported = func(*corefile.Corefile, string) ([]string, error) { return nil, nil }
	for _, f := range e.checkCoreDNS(context.Background()) {
		if strings.Contains(f.Detail, "does not parse") {
			t.Errorf("got %s %q, want the Corefile checked without its imports", f.Severity, f.Detail)
		}
	}
}
