package helmchart

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// daemonSet returns the rendered DaemonSet's pod spec and its container.
func daemonSet(t *testing.T, objs map[string]object) (pod, ctr map[string]any) {
	t.Helper()
	ds, ok := objs["DaemonSet kube-system/nodecache"]
	if !ok {
		t.Fatal("no DaemonSet kube-system/nodecache rendered")
	}
	pod = ds["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	return pod, pod["containers"].([]any)[0].(map[string]any)
}

// configYAML returns the rendered config.yaml.
func configYAML(t *testing.T, objs map[string]object) string {
	t.Helper()
	cm, ok := objs["ConfigMap kube-system/nodecache"]
	if !ok {
		t.Fatal("no ConfigMap kube-system/nodecache rendered")
	}
	return cm["data"].(map[string]any)["config.yaml"].(string)
}

// TestValuesReachTheObjects sets each value operators set in the
// node-local-dns chart and wants it where the agent or Kubernetes reads it.
func TestValuesReachTheObjects(t *testing.T) {
	values := map[string]any{}
	if err := yaml.Unmarshal([]byte(`
image: {repository: registry.example/dns/nodecache, digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", pullPolicy: IfNotPresent}
imagePullSecrets: [{name: regcred}]
localIP: 169.254.25.10
interceptKubeDNS: {enabled: true, clusterIP: 10.100.0.10}
clusterDomain: cluster.prod
upstreams: [10.0.0.2, "tls://9.9.9.9#dns.quad9.net"]
stubDomains:
  corp.example: [10.0.0.1, "10.0.0.2:5353"]
  lab.example: "10.0.0.3 force-tcp timeout=1s"
config: {cache-size: 128MiB, log-level: debug}
resources: {requests: {cpu: 100m, memory: 256Mi}, limits: {memory: 512Mi}}
priorityClassName: dns-critical
tolerations: [{key: dedicated, operator: Equal, value: dns, effect: NoSchedule}]
nodeSelector: {pool: general}
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: no-dns, operator: DoesNotExist}]}]}}}
extraArgs: [--query-log-rate=10]
extraEnv: [{name: GOGC, value: "100"}]
metrics: {host: "[$(HOST_IP)]", port: 9300}
podAnnotations: {team: dns}
podLabels: {tier: node}
minReadySeconds: 5
runDir: /var/run/nodecache
kubeletConfig: /etc/kubernetes/kubelet/config.json
`), &values); err != nil {
		t.Fatal(err)
	}
	objs := mustRender(t, values)
	pod, ctr := daemonSet(t, objs)
	cfg := map[string]any{}
	if err := yaml.Unmarshal([]byte(configYAML(t, objs)), &cfg); err != nil {
		t.Fatal(err)
	}
	ds := objs["DaemonSet kube-system/nodecache"]
	tmplMeta := ds["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)
	var runPath, kubeletPath any
	for _, v := range pod["volumes"].([]any) {
		switch v.(map[string]any)["name"] {
		case "run":
			runPath = v.(map[string]any)["hostPath"].(map[string]any)["path"]
		case "kubelet-config-file":
			kubeletPath = v.(map[string]any)["hostPath"].(map[string]any)["path"]
		}
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"image", ctr["image"], "registry.example/dns/nodecache@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		{"imagePullPolicy", ctr["imagePullPolicy"], "IfNotPresent"},
		{"imagePullSecrets", pod["imagePullSecrets"], []any{map[string]any{"name": "regcred"}}},
		{"local-ip", cfg["local-ip"], "169.254.25.10"},
		{"health-addr", cfg["health-addr"], "169.254.25.10:8080"},
		{"cluster-domain", cfg["cluster-domain"], "cluster.prod"},
		{"upstream", cfg["upstream"], "10.0.0.2,tls://9.9.9.9#dns.quad9.net"},
		{"stub-domain", cfg["stub-domain"], []any{"corp.example=10.0.0.1,10.0.0.2:5353", "lab.example=10.0.0.3 force-tcp timeout=1s"}},
		{"cache-size", cfg["cache-size"], "128MiB"},
		{"log-level", cfg["log-level"], "debug"},
		{"a default kept", cfg["sync-interval"], "10s"},
		{"resources", ctr["resources"], values["resources"]},
		{"priorityClassName", pod["priorityClassName"], "dns-critical"},
		{"tolerations", pod["tolerations"], values["tolerations"]},
		// Merged with the default: still never a Windows node.
		{"nodeSelector", pod["nodeSelector"], map[string]any{"pool": "general", "kubernetes.io/os": "linux"}},
		{"kubeletConfig", kubeletPath, "/etc/kubernetes/kubelet/config.json"},
		{"affinity", pod["affinity"], values["affinity"]},
		{"minReadySeconds", ds["spec"].(map[string]any)["minReadySeconds"], float64(5)},
		{"podAnnotations", tmplMeta["annotations"], map[string]any{"team": "dns", "prometheus.io/scrape": "true", "prometheus.io/port": "9300"}},
		{"podLabels", tmplMeta["labels"], map[string]any{"app.kubernetes.io/name": "nodecache", "tier": "node"}},
		{"runDir", runPath, "/var/run/nodecache"},
	} {
		if d := cmp.Diff(c.want, c.got); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.what, d)
		}
	}
	args := ctr["args"].([]any)
	for _, want := range []string{"--local-ip=169.254.25.10,10.100.0.10", "--metrics-addr=[$(HOST_IP)]:9300", "--query-log-rate=10"} {
		if !slices.Contains(args, any(want)) {
			t.Errorf("args %v: want %s", args, want)
		}
	}
	if last := args[len(args)-1]; last != "--query-log-rate=10" {
		t.Errorf("args %v: want extraArgs last, so that they win", args)
	}
	env := ctr["env"].([]any)
	if last := env[len(env)-1].(map[string]any); last["name"] != "GOGC" || last["value"] != "100" {
		t.Errorf("env %v: want extraEnv GOGC=100 last", env)
	}
	svc := objs["Service kube-system/nodecache-metrics"]
	if p := svc["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)["port"]; p != float64(9300) {
		t.Errorf("metrics Service port %v, want 9300", p)
	}
}

var (
	agentOnce sync.Once
	agentBin  string
	agentErr  error
)

// agent builds the nodecache binary once, from this repository.
func agent(t *testing.T) string {
	t.Helper()
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "helmchart-agent-")
		if err != nil {
			agentErr = err
			return
		}
		agentBin = filepath.Join(dir, "nodecache")
		cmd := exec.Command("go", "build", "-o", agentBin, "./cmd/nodecache")
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentErr = err
			t.Logf("go build ./cmd/nodecache:\n%s", out)
		}
	})
	if agentErr != nil {
		t.Fatalf("building the agent: %v", agentErr)
	}
	return agentBin
}

// TestConfigIsValid runs the agent's own `nodecache check-config` on the
// config.yaml the chart renders, with the defaults and with values set, so a
// key the agent does not know or a bad value fails here and not on a node.
// The DaemonSet's args come first, as in the pod.
func TestConfigIsValid(t *testing.T) {
	bin := agent(t)
	for _, c := range []struct {
		name   string
		values map[string]any
		ok     bool
	}{
		{"defaults", nil, true},
		{"values", map[string]any{
			"localIP":       "169.254.25.10",
			"clusterDomain": "cluster.prod",
			"upstreams":     []any{"10.0.0.2", "tls://9.9.9.9#dns.quad9.net"},
			"stubDomains":   map[string]any{"corp.example": []any{"10.0.0.1", "10.0.0.2:5353"}, "lab.example": "10.0.0.3 force-tcp timeout=1s"},
			"config":        map[string]any{"cache-size": "128MiB", "autopath": true, "watch-pods": true},
		}, true},
		{"unknown key", map[string]any{"config": map[string]any{"cache-sise": "128MiB"}}, false},
		{"bad stub domain", map[string]any{"stubDomains": map[string]any{"corp.example": "not-an-ip"}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(path, []byte(configYAML(t, mustRender(t, c.values))), 0o600); err != nil {
				t.Fatal(err)
			}
			// The kube-dns ConfigMap is a directory the pod mounts; an
			// empty one here.
			kubeDNS := filepath.Join(dir, "kube-dns")
			if err := os.Mkdir(kubeDNS, 0o750); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "check-config", "--config", path, "--metrics-addr=10.0.0.5:9253",
				"--pod-state-dir=/var/run/nodecache-pod", "--kube-dns-config-dir="+kubeDNS)
			out, err := cmd.CombinedOutput()
			if c.ok && err != nil {
				t.Errorf("nodecache check-config of the rendered config: %v\n%s", err, out)
			}
			if !c.ok && (err == nil || !strings.Contains(string(out), path)) {
				t.Errorf("nodecache check-config of a bad config: got %v\n%s\nwant a failure naming the file", err, out)
			}
		})
	}
}
