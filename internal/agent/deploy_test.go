package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestDeployConfigMapIsAValidConfig parses the config.yaml the DaemonSet
// mounts with the agent's own --config code, so a misspelt key or a bad
// value in deploy/base fails here and not on every node.
func TestDeployConfigMapIsAValidConfig(t *testing.T) {
	path := baseConfigFile(t)
	// The DaemonSet's args: --metrics-addr on the node IP.
	cfg, err := ParseConfig([]string{"--config", path, "--metrics-addr", "10.0.0.5:9253"})
	if err != nil {
		t.Fatalf("deploy/base config.yaml: %v", err)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"local-ip", cfg.LocalIPs[0].String(), "169.254.20.10"},
		{"cache-size", int64(cfg.CacheSize), int64(64 << 20)},
		{"health-addr", cfg.HealthAddr, "169.254.20.10:8080"},
		{"admin-socket", cfg.AdminSocket, "/run/nodecache/admin.sock"},
		{"handover-socket", cfg.HandoverSocket, "/run/nodecache/handover.sock"},
		{"ttl", cfg.TTL, 5 * time.Second},
		{"metrics-addr", cfg.MetricsAddr, "10.0.0.5:9253"},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestDeployScrapesEachAgentOnce checks the scrape set-up: the agents' pods
// ask to be scraped (annotations) and the Service does not, so annotation
// based Prometheus configs scrape each agent once; and deploy/monitoring's
// PodMonitor selects those pods on the metrics port.
func TestDeployScrapesEachAgentOnce(t *testing.T) {
	type meta struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	}
	read := func(path string, v any) {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	var ds struct {
		Spec struct {
			Template struct {
				Metadata meta `json:"metadata"`
			} `json:"template"`
		} `json:"spec"`
	}
	read("../../deploy/base/daemonset.yaml", &ds)
	var svc struct {
		Metadata meta `json:"metadata"`
	}
	read("../../deploy/base/service.yaml", &svc)
	pod := ds.Spec.Template.Metadata
	if pod.Annotations["prometheus.io/scrape"] != "true" || pod.Annotations["prometheus.io/port"] != "9253" {
		t.Errorf("pod annotations: got %v, want prometheus.io/scrape true and port 9253", pod.Annotations)
	}
	for k := range svc.Metadata.Annotations {
		if strings.HasPrefix(k, "prometheus.io/") {
			t.Errorf("service annotation %s: the pods are scraped already; a second path doubles every series", k)
		}
	}
	var kust struct {
		Resources []string `json:"resources"`
	}
	read("../../deploy/monitoring/kustomization.yaml", &kust)
	kinds := map[string]bool{}
	for _, r := range kust.Resources {
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Spec       struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				Endpoints []struct {
					TargetPort int `json:"targetPort"`
				} `json:"podMetricsEndpoints"`
			} `json:"spec"`
		}
		read(filepath.Join("../../deploy/monitoring", r), &obj)
		kinds[obj.Kind] = obj.APIVersion == "monitoring.coreos.com/v1"
		if obj.Kind != "PodMonitor" {
			continue
		}
		for k, v := range obj.Spec.Selector.MatchLabels {
			if pod.Labels[k] != v {
				t.Errorf("PodMonitor selects %s=%s, which the agents' pods (%v) lack", k, v, pod.Labels)
			}
		}
		if len(obj.Spec.Endpoints) != 1 || obj.Spec.Endpoints[0].TargetPort != 9253 {
			t.Errorf("PodMonitor endpoints: got %+v, want one on port 9253", obj.Spec.Endpoints)
		}
	}
	if !kinds["PodMonitor"] || !kinds["PrometheusRule"] {
		t.Errorf("deploy/monitoring: got kinds %v, want a monitoring.coreos.com/v1 PodMonitor and PrometheusRule", kinds)
	}
}

// TestDeployDaemonSetArgsAndProbes parses the DaemonSet's own args (with the
// ConfigMap's config.yaml) and checks that its exec probes ask the probe
// socket of the --pod-state-dir those args set, on a pod-scoped volume.
func TestDeployDaemonSetArgsAndProbes(t *testing.T) {
	data, err := os.ReadFile("../../deploy/base/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds struct {
		Spec struct {
			UpdateStrategy struct {
				RollingUpdate struct {
					MaxSurge       any `json:"maxSurge"`
					MaxUnavailable any `json:"maxUnavailable"`
				} `json:"rollingUpdate"`
			} `json:"updateStrategy"`
			Template struct {
				Spec struct {
					Containers []struct {
						Args           []string  `json:"args"`
						LivenessProbe  probeSpec `json:"livenessProbe"`
						ReadinessProbe probeSpec `json:"readinessProbe"`
						VolumeMounts   []struct {
							Name      string `json:"name"`
							MountPath string `json:"mountPath"`
						} `json:"volumeMounts"`
					} `json:"containers"`
					Volumes []struct {
						Name     string    `json:"name"`
						EmptyDir *struct{} `json:"emptyDir"`
					} `json:"volumes"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &ds); err != nil {
		t.Fatal(err)
	}
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if s, ok := ru.MaxSurge.(string); !ok || !strings.HasSuffix(s, "%") {
		t.Errorf("maxSurge: got %v, want a percentage (an absolute 1 updates one node at a time)", ru.MaxSurge)
	}
	if ru.MaxUnavailable != float64(0) {
		t.Errorf("maxUnavailable: got %v, want 0", ru.MaxUnavailable)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	cfgPath := baseConfigFile(t)
	var args []string
	for _, a := range c.Args[1:] { // after "run"
		a = strings.ReplaceAll(a, "$(HOST_IP)", "10.0.0.5")
		a = strings.ReplaceAll(a, "/etc/nodecache/config.yaml", cfgPath)
		args = append(args, a)
	}
	cfg, err := ParseConfig(args)
	if err != nil {
		t.Fatalf("the DaemonSet's args %q: %v", c.Args, err)
	}
	if cfg.PodStateDir == "" {
		t.Fatal("the DaemonSet sets no --pod-state-dir: a superseded pod would exit and be restarted")
	}
	mounted := ""
	for _, m := range c.VolumeMounts {
		if m.MountPath == cfg.PodStateDir {
			mounted = m.Name
		}
	}
	emptyDir := false
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == mounted && v.EmptyDir != nil {
			emptyDir = true
		}
	}
	if !emptyDir {
		t.Errorf("--pod-state-dir %s: want it on an emptyDir volume (pod-scoped), got volume %q", cfg.PodStateDir, mounted)
	}
	for name, p := range map[string]probeSpec{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		cmd := strings.Join(p.Exec.Command, " ")
		if !strings.Contains(cmd, "nodecache probe") || !strings.Contains(cmd, "--pod-state-dir="+cfg.PodStateDir) {
			t.Errorf("%s probe: got %q, want `nodecache probe ... --pod-state-dir=%s` (an httpGet probe on the shared host network may reach the other pod)", name, cmd, cfg.PodStateDir)
		}
	}
}

type probeSpec struct {
	Exec struct {
		Command []string `json:"command"`
	} `json:"exec"`
}
