//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodecache/nodecache/pkg/cache"
)

// TestRealNodeHelm installs the Helm chart deploy/helm/nodecache with the
// helm binary on the real kubelet and passes the checks of TestRealNode's
// `kubectl apply -k`: the agent Ready and the node set up; a pod resolving
// through it; five rollouts made with `helm upgrade` under load, nothing
// lost; a SIGKILL; `helm uninstall` leaving the node clean; then a
// `kubectl apply -k` install adopted by `helm install`. Between, what an
// operator troubleshoots with: `kubectl exec` of status, top, tail and
// doctor in the agent's pod, and the `kubectl debug node/...` recipe of
// docs/operating.md.
func TestRealNodeHelm(t *testing.T) {
	n := sharedRealNode(t)
	h := n.newHelm(t)
	ctx := t.Context()
	metricsPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	n.namespace(t, clientNS)
	// kubeadm's KubeletConfiguration ConfigMap, which the DaemonSet mounts
	// for doctor: this node's own config.
	n.kubeletConfigMap(t)
	t.Cleanup(func() { h.uninstall(t) })

	// 1. Install.
	start := time.Now()
	out, err := h.run(ctx, "install", "nodecache", h.chart, "-n", agentNS, "-f", h.writeValues(t, metricsPort))
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	t.Logf("helm install:\n%s", out)
	agent := n.waitAgents(ctx, 1, 3*time.Minute)[0]
	t.Logf("install: agent pod %s Ready %v after helm install", agent.Name, time.Since(start).Round(100*time.Millisecond))
	if err := n.hostStateProblems(); err != nil {
		t.Fatalf("after helm install: %v", err)
	}
	if by := agent.Labels["app.kubernetes.io/name"]; by != "nodecache" {
		t.Errorf("agent pod labels %v: want app.kubernetes.io/name=nodecache", agent.Labels)
	}
	n.checkMemoryLimit(metricsPort)

	// 2. A pod resolves through it.
	client := n.startClient(ctx)
	n.checkResolvConf(ctx, client)
	n.checkPodResolves(ctx, client, metricsPort)

	// 3. Troubleshooting, as docs/operating.md says.
	n.checkExecTroubleshooting(ctx, &agent, client)
	n.checkDebugNode(ctx)

	// 4. Rollouts made with helm upgrade.
	n.checkRolloutsWith(ctx, client, h.upgradeRollouts())

	// 5. Crash.
	n.checkCrash(ctx, client)

	// 6. Uninstall.
	h.uninstall(t)

	// 7. An install made with kubectl apply -k, adopted by helm install.
	n.checkAdoption(t, h, client, metricsPort)
}

// helmRig runs the helm binary against the real node as its cluster admin,
// with helm's own files under the rig's directory.
type helmRig struct {
	n     *realNode
	bin   string
	chart string
	env   []string
}

func (n *realNode) newHelm(t *testing.T) *helmRig {
	t.Helper()
	chart, err := filepath.Abs("../deploy/helm/nodecache")
	if err != nil {
		t.Fatal(err)
	}
	home := mkdir(t, n.dir, "helm")
	return &helmRig{n: n, bin: helmBinary(t), chart: chart, env: append(os.Environ(),
		"KUBECONFIG="+n.api.AdminKubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))}
}

func (h *helmRig) run(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.bin, args...)
	cmd.Env = h.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// writeValues writes the values that point the chart at the rig, as
// writeOverlay's patch does for the Kustomize base: the imported image, the
// API server through the node's forwarder, the test upstream, metrics on
// the node's loopback, the hostPath state under the rig's directory.
func (h *helmRig) writeValues(t *testing.T, metricsPort int) string {
	t.Helper()
	n := h.n
	_, apiPort, _ := net.SplitHostPort(n.apiFwd.Addr())
	v := fmt.Sprintf(`image:
  repository: %s
  tag: %s
  pullPolicy: Never
upstreams: [%q]
metrics:
  host: 127.0.0.1
  port: %d
minReadySeconds: 3
runDir: %s
extraEnv:
  - {name: KUBERNETES_SERVICE_HOST, value: "127.0.0.1"}
  - {name: KUBERNETES_SERVICE_PORT, value: %q}
`, agentRepo, agentImageTags[0], n.upstream.Addr, metricsPort, filepath.Join(n.dir, "run-nodecache"), apiPort)
	return writeRigFile(t, filepath.Join(n.dir, "helm", "values.yaml"), v)
}

// upgradeRollouts are five rollouts made with `helm upgrade
// --reuse-values`: a changed pod annotation (a restart) and the image tag,
// alternately, as kubectlRollouts does with kubectl.
func (h *helmRig) upgradeRollouts() []rolloutStep {
	var steps []rolloutStep
	for i, set := range []string{
		"podAnnotations.e2e-rollout=1", "image.tag=" + agentImageTags[1],
		"podAnnotations.e2e-rollout=2", "image.tag=" + agentImageTags[0],
		"podAnnotations.e2e-rollout=3",
	} {
		steps = append(steps, rolloutStep{"helm upgrade --set-string " + set, func(ctx context.Context) error {
			out, err := h.run(ctx, "upgrade", "nodecache", h.chart, "-n", agentNS, "--reuse-values", "--set-string", set)
			if err == nil && !strings.Contains(out, fmt.Sprintf("REVISION: %d", i+2)) {
				err = fmt.Errorf("helm upgrade printed no REVISION: %d:\n%s", i+2, out)
			}
			return err
		}})
	}
	return steps
}

// uninstall runs `helm uninstall`, waits until no agent pod is left and
// wants the node clean and no object of the release left. No release is
// fine: it is t.Cleanup's too.
func (h *helmRig) uninstall(t testing.TB) {
	t.Helper()
	n := h.n
	ctx := context.Background()
	out, err := h.run(ctx, "uninstall", "nodecache", "-n", agentNS, "--wait", "--timeout", "3m", "--ignore-not-found")
	if err != nil {
		t.Errorf("helm uninstall: %v", err)
		return
	}
	t.Logf("helm uninstall: %s", strings.TrimSpace(out))
	eventuallyWithin(t, 2*time.Minute, "no agent pod left", func() error {
		if pods := n.agentPods(ctx); len(pods) > 0 {
			return fmt.Errorf("%d agent pods left", len(pods))
		}
		return nil
	})
	eventuallyWithin(t, 30*time.Second, "the node clean after helm uninstall", n.leftovers)
	left, err := n.kubectl(ctx, "get", "daemonset,configmap,service,serviceaccount,role,rolebinding,clusterrole,clusterrolebinding",
		"-A", "-l", "app.kubernetes.io/instance=nodecache", "-o", "name")
	if err != nil || strings.TrimSpace(left) != "" {
		t.Errorf("objects of the release after helm uninstall: %q (%v), want none", left, err)
	}
	if out, err := h.run(ctx, "list", "-n", agentNS, "-q"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("helm list after helm uninstall: %q (%v), want no release", out, err)
	}
}

// kubeletConfigMap creates kube-system/kubelet-config as kubeadm does (the
// KubeletConfiguration under key kubelet), with this node's kubelet config,
// and deletes it when t ends.
func (n *realNode) kubeletConfigMap(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.dir, "kubelet", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubelet-config"}, Data: map[string]string{"kubelet": string(b)}}
	if _, err := n.admin.CoreV1().ConfigMaps(agentNS).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := n.admin.CoreV1().ConfigMaps(agentNS).Delete(context.Background(), "kubelet-config", metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting kube-system/kubelet-config: %v", err)
		}
	})
}

// helmBinary returns the helm binary of the version tools/helmchart's Go
// module requires, built once from the Go module proxy into the e2e cache
// (NODECACHE_E2E_CACHE, default ~/.cache/nodecache-e2e) beside the
// Kubernetes binaries, so the chart is tested with the helm its render test
// uses.
func helmBinary(t *testing.T) string {
	t.Helper()
	mod, err := os.ReadFile("../tools/helmchart/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var version string
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "helm.sh/helm/v4" {
			version = f[1]
		}
	}
	if version == "" {
		t.Fatal("tools/helmchart/go.mod requires no helm.sh/helm/v4")
	}
	cache := os.Getenv("NODECACHE_E2E_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(home, ".cache", "nodecache-e2e")
	}
	dir := filepath.Join(cache, "bin", "helm-"+version)
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err == nil {
		return bin
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := exec.CommandContext(t.Context(), "go", "install", "-trimpath", "-ldflags", "-s -w", "helm.sh/helm/v4/cmd/helm@"+version)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building helm %s: %v\n%s", version, err, out)
	}
	t.Logf("built helm %s into %s in %v", version, dir, time.Since(start).Round(time.Second))
	return bin
}

// checkMemoryLimit wants the Go soft limit the agent derived at start from
// its container's memory limit (the chart's 256Mi, read from the cgroup):
// 90 % of it less the cache journal's ring (5 MiB), as docs/operating.md
// says.
func (n *realNode) checkMemoryLimit(metricsPort int) {
	t := n.t
	text := n.agentMetrics(metricsPort)
	cgroup := metricSum(t, text, `nodecache_memory_limit_bytes{source="cgroup"}`)
	soft := metricSum(t, text, `nodecache_memory_limit_bytes{source="gomemlimit"}`)
	const limit = 256 << 20
	want := float64(limit - limit/10 - min(cache.DefaultJournalBytes, limit/8))
	t.Logf("memory: cgroup limit %.0f bytes, GOMEMLIMIT %.0f bytes (%.1f MiB)", cgroup, soft, soft/(1<<20))
	if cgroup != limit || soft != want {
		t.Errorf("nodecache_memory_limit_bytes: cgroup %.0f, gomemlimit %.0f; want %d (the pod's limit) and %.0f", cgroup, soft, limit, want)
	}
}
