package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestKubeletConfigPath: doctor reads the node's kubelet config, and in the
// agent's pod (no such file) the kubelet-config ConfigMap it mounts; a
// --kubelet-config given is read as it is.
func TestKubeletConfigPath(t *testing.T) {
	dir := t.TempDir()
	node := filepath.Join(dir, "var-lib-kubelet-config.yaml")
	pod := filepath.Join(dir, "kubelet-config", "kubelet")
	missing := filepath.Join(dir, "missing")
	for _, p := range []string{node, pod} {
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("clusterDNS: [169.254.20.10]\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name          string
		path          string
		given         bool
		podPath, want string
	}{
		{"on the node", node, false, pod, node},
		{"in the pod", missing, false, pod, pod},
		{"in the pod without the ConfigMap", missing, false, missing + "2", missing},
		{"given", missing, true, pod, missing},
	} {
		if got := kubeletConfigPath(c.path, c.given, c.podPath); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}
