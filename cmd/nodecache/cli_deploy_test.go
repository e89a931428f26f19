package main

import (
	"os"
	"path/filepath"
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
