package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestDeployConfigMapIsAValidConfig parses the config.yaml the DaemonSet
// mounts with the agent's own --config code, so a misspelt key or a bad
// value in deploy/base fails here and not on every node.
func TestDeployConfigMapIsAValidConfig(t *testing.T) {
	data, err := os.ReadFile("../../deploy/base/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(data, &cm); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := writeFile(path, cm.Data["config.yaml"]); err != nil {
		t.Fatal(err)
	}
	// The DaemonSet's args: --metrics-addr on the node IP.
	cfg, err := parseRunConfig([]string{"--config", path, "--metrics-addr", "10.0.0.5:9253"})
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

// checkDashboard checks that every metric deploy/grafana-dashboard.json
// queries is one the agent exports, after some traffic.
func (a *cliAgent) checkDashboard(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile("../../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	resp, err := http.Get("http://" + a.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, kind, _ := strings.Cut(rest, " ")
			exported[name] = true
			if kind == "histogram" {
				exported[name+"_bucket"] = true
			}
		}
	}
	// Vectors appear once they have a child: these have none before their
	// first event (a drop, a zone update after sync, a handover).
	for _, m := range []string{"nodecache_server_dropped_total", "nodecache_zone_programming_duration_seconds_bucket",
		"nodecache_handovers_total"} {
		if exported[m] {
			t.Logf("%s is exported already: the exception for it can go", m)
		}
		exported[m] = true
	}
	metricName := regexp.MustCompile(`nodecache_[a-z_]+`)
	n := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, m := range metricName.FindAllString(tg.Expr, -1) {
				n++
				if !exported[m] {
					t.Errorf("panel %q queries %s: got no such metric from the agent", p.Title, m)
				}
			}
		}
	}
	if n == 0 {
		t.Errorf("dashboard: got no nodecache_ metric in any panel, want some")
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
	cmData, err := os.ReadFile("../../deploy/base/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(cmData, &cm); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := writeFile(cfgPath, cm.Data["config.yaml"]); err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range c.Args[1:] { // after "run"
		a = strings.ReplaceAll(a, "$(HOST_IP)", "10.0.0.5")
		a = strings.ReplaceAll(a, "/etc/nodecache/config.yaml", cfgPath)
		args = append(args, a)
	}
	cfg, err := parseRunConfig(args)
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
