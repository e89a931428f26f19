package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodecache/nodecache/internal/migrate"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestMigrateGolden")

// TestMigrateGolden translates every Corefile under testdata/migrate and
// the stock Corefiles of testdata/corpus, and compares the config
// written, the lines on stderr and the exit status with the golden files
// want.yaml and want.stderr. A stock Corefile must name its SOURCE and
// exit 0 or 3 (one line per real loss), never 1 or 2.
func TestMigrateGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/migrate/*/Corefile")
	corpus, err2 := filepath.Glob("testdata/corpus/*/Corefile")
	if err != nil || err2 != nil || len(dirs) == 0 || len(corpus) < 12 {
		t.Fatalf("test Corefiles: got %d and %d stock ones (%v %v), want some and at least 12", len(dirs), len(corpus), err, err2)
	}
	for _, cf := range append(dirs, corpus...) {
		dir := filepath.Dir(cf)
		stock := strings.HasPrefix(dir, "testdata/corpus/")
		t.Run(strings.TrimPrefix(dir, "testdata/"), func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, "SOURCE")); stock && err != nil {
				t.Fatalf("a stock Corefile without its SOURCE: %v", err)
			}
			args := []string{"--corefile", cf}
			if data, err := os.ReadFile(filepath.Join(dir, "args")); err == nil {
				args = append(args, strings.Fields(string(data))...)
			}
			var stdout, stderr bytes.Buffer
			err := runMigrate(context.Background(), args, migrateEnv{stdout: &stdout, stderr: &stderr, client: noCluster})
			fmt.Fprintf(&stderr, "exit %d\n", ExitCode(err))
			if err != nil {
				fmt.Fprintln(&stderr, err)
			}
			golden(t, filepath.Join(dir, "want.yaml"), stdout.String())
			golden(t, filepath.Join(dir, "want.stderr"), stderr.String())
			if code := ExitCode(err); stock && code != 0 && code != exitUnsupported {
				t.Errorf("a stock Corefile: got exit %d (%v), want 0 or 3", code, err)
			}
			if ExitCode(err) == 0 || ExitCode(err) == exitUnsupported {
				if err := migrate.Check(stdout.Bytes()); err != nil {
					t.Errorf("the config written does not load: %v", err)
				}
			}
		})
	}
}

func noCluster(string) (kubernetes.Interface, error) {
	return nil, errors.New("no cluster in this test")
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (go test -run TestMigrateGolden -update writes it): %v", err)
	}
	if got != string(want) {
		t.Errorf("%s: got\n%s\nwant\n%s", path, got, want)
	}
}

// TestMigrateFromCluster reads the ConfigMaps from an API (a fake
// clientset): node-local-dns's Corefile wins over coredns's, and the
// kube-dns ConfigMap's stub domains are checked and named.
func TestMigrateFromCluster(t *testing.T) {
	nodeLocal, err := os.ReadFile("testdata/migrate/nodelocaldns/Corefile")
	if err != nil {
		t.Fatal(err)
	}
	cm := func(name string, data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"}, Data: data}
	}
	tests := []struct {
		name    string
		objects []runtime.Object
		code    int
		want    []string // lines the config must hold
	}{
		{"node-local-dns and kube-dns", []runtime.Object{
			cm("coredns", map[string]string{"Corefile": ".:53 {\n forward . 192.0.2.1\n}\n"}),
			cm("node-local-dns", map[string]string{"Corefile": string(nodeLocal)}),
			cm("kube-dns", map[string]string{"stubDomains": `{"acme.local": ["10.150.0.1"]}`}),
		}, 0, []string{"from kube-system/node-local-dns.", "kube-dns ConfigMap: stubDomains acme.local=10.150.0.1:53;"}},
		{"coredns only", []runtime.Object{
			cm("coredns", map[string]string{"Corefile": ".:53 {\n forward . 192.0.2.1\n}\n"}),
		}, 0, []string{"upstream: 192.0.2.1  # kube-system/coredns:2 forward . 192.0.2.1"}},
		{"bad kube-dns", []runtime.Object{
			cm("coredns", map[string]string{"Corefile": ".:53 {\n forward . 192.0.2.1\n}\n"}),
			cm("kube-dns", map[string]string{"stubDomains": `{"acme.local": "10.150.0.1"}`}),
		}, exitBadInput, nil},
		{"no Corefile", nil, exitBadInput, nil},
		// kubespray names its ConfigMap nodelocaldns; before, migrate fell
		// back to the coredns ConfigMap without a word.
		{"kubespray nodelocaldns", []runtime.Object{
			cm("coredns", map[string]string{"Corefile": ".:53 {\n forward . 192.0.2.1\n}\n"}),
			cm("nodelocaldns", map[string]string{"Corefile": ".:53 {\n bind 169.254.25.10\n forward . 192.0.2.9\n}\n"}),
		}, 0, []string{"from kube-system/nodelocaldns.", "upstream: 192.0.2.9", "migrate: read ConfigMap kube-system/nodelocaldns (the node-local DNS ConfigMap, found by its name)"}},
		// The node-local-dns Helm chart names its ConfigMap after the release.
		{"helm release", []runtime.Object{
			cm("coredns", map[string]string{"Corefile": ".:53 {\n forward . 192.0.2.1\n}\n"}),
			labelled(cm("my-release-node-local-dns", map[string]string{"Corefile": ".:53 {\n forward . 192.0.2.8\n}\n"}), "app.kubernetes.io/name", "node-local-dns"),
		}, 0, []string{"upstream: 192.0.2.8", "migrate: read ConfigMap kube-system/my-release-node-local-dns (the node-local DNS ConfigMap, found by its labels app.kubernetes.io/name=node-local-dns)"}},
		{"rke2 coredns", []runtime.Object{
			labelled(cm("rke2-coredns-rke2-coredns", map[string]string{"Corefile": ".:53 {\n forward . 192.0.2.7\n}\n"}), "app.kubernetes.io/name", "rke2-coredns"),
		}, 0, []string{"upstream: 192.0.2.7", "found by its labels app.kubernetes.io/name in (coredns,rke2-coredns)"}},
		{"two helm releases", []runtime.Object{
			labelled(cm("a-node-local-dns", map[string]string{"Corefile": ". {\n}\n"}), "app.kubernetes.io/name", "node-local-dns"),
			labelled(cm("b-node-local-dns", map[string]string{"Corefile": ". {\n}\n"}), "app.kubernetes.io/name", "node-local-dns"),
		}, exitBadInput, []string{"several node-local DNS ConfigMaps in kube-system (a-node-local-dns, b-node-local-dns): say which with --configmap NAME"}},
		// AKS and k3s import the coredns-custom ConfigMap's keys.
		{"coredns-custom", []runtime.Object{
			cm("coredns", map[string]string{"Corefile": ".:53 {\n forward . 192.0.2.1\n import custom/*.override\n}\nimport custom/*.server\n"}),
			cm("coredns-custom", map[string]string{"a.server": "corp.example:53 {\n forward . 10.1.0.1\n}\n", "b.override": "log\n"}),
		}, 0, []string{"corp.example=10.1.0.1  # kube-system/coredns-custom/a.server:2 forward . 10.1.0.1", "query-log-rate: '100'  # kube-system/coredns-custom/b.override:1 log"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objects...)
			var stdout, stderr bytes.Buffer
			args := []string{"--from-cluster"}
			if tt.name == "node-local-dns and kube-dns" {
				args = append(args, "--var=__PILLAR__DNS__DOMAIN__=cluster.local", "--var=__PILLAR__LOCAL__DNS__=169.254.20.10", "--var=__PILLAR__DNS__SERVER__=10.96.0.10")
			}
			err := runMigrate(context.Background(), args, migrateEnv{stdout: &stdout, stderr: &stderr,
				client: func(string) (kubernetes.Interface, error) { return client, nil }})
			if got := ExitCode(err); got != tt.code {
				t.Fatalf("got exit %d (%v), want %d; stderr:\n%s", got, err, tt.code, stderr.String())
			}
			all := stdout.String() + stderr.String() + fmt.Sprint(err)
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("config lacks %q; got\n%s", w, stdout.String())
				}
			}
			for _, a := range client.Actions() {
				if a.GetVerb() != "get" && a.GetVerb() != "list" {
					t.Errorf("got a %s on the API, want reads only", a.GetVerb())
				}
			}
		})
	}
}

func labelled(cm *corev1.ConfigMap, k, v string) *corev1.ConfigMap {
	cm.Labels = map[string]string{k: v, "app.kubernetes.io/instance": cm.Name}
	return cm
}

// TestMigrateAcceptAndOutput checks --accept-unsupported (exit 0, the
// lines still on stderr) and -o FILE.
func TestMigrateAcceptAndOutput(t *testing.T) {
	out := filepath.Join(t.TempDir(), "config.yaml")
	var stdout, stderr bytes.Buffer
	err := runMigrate(context.Background(), []string{"--corefile", "testdata/migrate/unsupported-mix/Corefile", "-o", out, "--accept-unsupported"},
		migrateEnv{stdout: &stdout, stderr: &stderr, client: noCluster})
	if err != nil {
		t.Fatalf("got %v, want exit 0 with --accept-unsupported", err)
	}
	if !strings.Contains(stderr.String(), "not reproduced: Corefile:18 keepttl") {
		t.Errorf("got stderr %q, want the keepttl line", stderr.String())
	}
	want, _ := os.ReadFile("testdata/migrate/unsupported-mix/want.yaml")
	got, err := os.ReadFile(out)
	if err != nil || string(got) != string(want) || stdout.Len() != 0 {
		t.Errorf("got file %q (%v) and stdout %q, want the golden config in the file only", got, err, stdout.String())
	}
	for _, args := range [][]string{{}, {"--corefile", "nope/Corefile"}, {"--corefile", out, "extra"}, {"--var", "novalue", "--corefile", out}} {
		if err := runMigrate(context.Background(), args, migrateEnv{stdout: &stdout, stderr: &stderr, client: noCluster}); ExitCode(err) != exitBadInput {
			t.Errorf("args %q: got %v, want exit %d", args, err, exitBadInput)
		}
	}
}
