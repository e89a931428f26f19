//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// kubectl runs kubectl as admin of the test cluster and returns its
// combined output.
func kubectl(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", env.api.AdminKubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// manifestObject is the identity of one rendered object.
type manifestObject struct {
	Kind, Namespace, Name string
}

func (o manifestObject) String() string {
	return strings.ToLower(o.Kind) + "/" + o.Name + " -n " + o.Namespace
}

// renderKustomization runs `kubectl kustomize dir` and lists its objects.
func renderKustomization(t testing.TB, dir string) (string, []manifestObject) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "kubectl", "kustomize", dir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	var objs []manifestObject
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		var m struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("kustomize output of %s: %v", dir, err)
		}
		if m.Kind != "" {
			objs = append(objs, manifestObject{m.Kind, m.Metadata.Namespace, m.Metadata.Name})
		}
	}
	return string(out), objs
}

// TestDeployManifests renders deploy/base and the intercept-kube-dns
// overlay, validates them with a server-side dry run against the test
// apiserver (strict field validation, admission), applies them for real
// with server-side apply, checks every object exists and deletes the ones
// it created (the agent's RBAC objects predate it and stay). A copy of the
// base with a misspelt field must fail the dry run, so the check has teeth.
func TestDeployManifests(t *testing.T) {
	requireSuite(t)
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Fatalf("kubectl is needed: %v", err)
	}
	for _, dir := range []string{"../deploy/base", "../deploy/overlays/intercept-kube-dns", "../deploy/overlays/pod-access",
		"../deploy/overlays/nft-only"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			rendered, objs := renderKustomization(t, dir)
			kinds := map[string]bool{}
			for _, o := range objs {
				kinds[o.Kind] = true
			}
			for _, k := range []string{"DaemonSet", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap"} {
				if !kinds[k] {
					t.Errorf("kubectl kustomize %s: got kinds %v, want a %s", dir, kinds, k)
				}
			}
			if strings.Contains(dir, "intercept") && !strings.Contains(rendered, "--local-ip=169.254.20.10,10.96.0.10") {
				t.Errorf("overlay: got no --local-ip with the kube-dns ClusterIP in\n%s", rendered)
			}
			// NET_RAW only where iptables-legacy may be chosen: not with nft-only.
			nftOnly := strings.Contains(dir, "nft-only")
			if got := strings.Contains(rendered, "NET_RAW"); got == nftOnly || nftOnly != strings.Contains(rendered, "--iptables-mode=nft") {
				t.Errorf("%s: got NET_RAW %v, --iptables-mode=nft %v; want NET_RAW only without nft-only", dir, got, !got)
			}
			// The pod list and watch, and the flag that uses them, come
			// together: only with the pod-access overlay.
			podAccess := strings.Contains(dir, "pod-access")
			if got := strings.Contains(rendered, "--watch-pods") && kinds["ClusterRole"] &&
				slices.Contains(objs, manifestObject{"ClusterRole", "", "nodecache-pods"}); got != podAccess {
				t.Errorf("%s: got --watch-pods with ClusterRole nodecache-pods %v, want %v", dir, got, podAccess)
			}
			ctx := t.Context()
			if out, err := kubectl(ctx, "apply", "--server-side", "--dry-run=server", "-k", dir); err != nil {
				t.Fatalf("server-side dry run: %v", err)
			} else {
				t.Logf("dry run:\n%s", strings.TrimSpace(out))
			}
			existed := map[manifestObject]bool{}
			for _, o := range objs {
				_, err := kubectl(ctx, "get", strings.ToLower(o.Kind), o.Name, "-n", o.Namespace)
				existed[o] = err == nil
			}
			t.Cleanup(func() {
				for _, o := range objs {
					if existed[o] {
						continue
					}
					if _, err := kubectl(context.Background(), "delete", strings.ToLower(o.Kind), o.Name, "-n", o.Namespace, "--wait=false"); err != nil {
						t.Errorf("deleting %v: %v", o, err)
					}
				}
			})
			if _, err := kubectl(ctx, "apply", "--server-side", "-k", dir); err != nil {
				t.Fatalf("server-side apply: %v", err)
			}
			for _, o := range objs {
				if _, err := kubectl(ctx, "get", strings.ToLower(o.Kind), o.Name, "-n", o.Namespace); err != nil {
					t.Errorf("%v after apply: %v", o, err)
				}
			}
			if strings.Contains(dir, "intercept") {
				args, err := kubectl(ctx, "get", "daemonset", "nodecache", "-n", "kube-system", "-o", "jsonpath={.spec.template.spec.containers[0].args}")
				if err != nil || !strings.Contains(args, "10.96.0.10") {
					t.Errorf("applied overlay DaemonSet args: got %q (%v), want the kube-dns ClusterIP among them", args, err)
				}
			}
		})
	}
	t.Run("networkpolicy example", func(t *testing.T) {
		// Validated by the API server; no CNI of this suite enforces
		// NetworkPolicy, so what it allows is checked by its unit test
		// (TestDeployNetworkPolicyExample) against the base's config.
		out, err := kubectl(t.Context(), "apply", "--server-side", "--dry-run=server", "-n", "default", "-f", "../deploy/examples/networkpolicy-dns.yaml")
		if err != nil || !strings.Contains(out, "allow-dns-nodecache") {
			t.Errorf("server-side dry run of deploy/examples/networkpolicy-dns.yaml: %v\n%s", err, out)
		}
	})
	t.Run("broken manifest fails", func(t *testing.T) {
		dir := t.TempDir()
		base := "../deploy/base"
		entries, err := os.ReadDir(base)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(base, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if e.Name() == "daemonset.yaml" {
				if !bytes.Contains(b, []byte("hostNetwork: true")) {
					t.Fatalf("daemonset.yaml: no hostNetwork: true to break")
				}
				b = bytes.Replace(b, []byte("hostNetwork: true"), []byte("hostNetwrok: true"), 1)
			}
			if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out, err := kubectl(t.Context(), "apply", "--server-side", "--dry-run=server", "-k", dir)
		if err == nil || !strings.Contains(err.Error(), "hostNetwrok") {
			t.Errorf("dry run of a DaemonSet with a misspelt field: got %v\n%s\nwant a failure naming hostNetwrok", err, out)
		}
	})
}
