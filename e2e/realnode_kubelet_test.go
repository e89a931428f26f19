//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// clusterDNSLine is the clusterDNS line of the rig's KubeletConfiguration.
var clusterDNSLine = regexp.MustCompile(`(?m)^clusterDNS: .*$`)

// setClusterDNS restarts the shared node's kubelet with clusterDNS ip, for
// the pods t creates; t's cleanup (after the cleanups t registers later,
// which delete those pods) restarts it with the rig's 169.254.20.10 again.
// Running pods keep running across a kubelet restart, as on any node.
func (n *realNode) setClusterDNS(t *testing.T, ip string) {
	t.Helper()
	t.Cleanup(func() { n.restartKubelet(t, linkLocalIP) })
	n.restartKubelet(t, ip)
}

// restartKubelet stops the kubelet, writes clusterDNS into its
// configuration, starts it with the same command line and waits until its
// healthz answers.
func (n *realNode) restartKubelet(t testing.TB, clusterDNS string) {
	t.Helper()
	b, err := os.ReadFile(n.kubeletCfg)
	if err != nil {
		t.Fatal(err)
	}
	if !clusterDNSLine.Match(b) {
		t.Fatalf("%s has no clusterDNS line", n.kubeletCfg)
	}
	cfg := clusterDNSLine.ReplaceAllString(string(b), fmt.Sprintf("clusterDNS: [%q]", clusterDNS))
	writeRigFile(t, n.kubeletCfg, cfg)
	start := time.Now()
	if err := n.kubelet.Stop(15 * time.Second); err != nil {
		t.Logf("stopping the kubelet: %v", err)
	}
	n.kubelet, err = startProc("kubelet", filepath.Join(n.dir, "kubelet.log"), n.kubeletArgv...)
	if err != nil {
		t.Fatal(err)
	}
	healthz := fmt.Sprintf("http://127.0.0.1:%d/healthz", n.kubeletHealthz)
	eventuallyWithin(t, 2*time.Minute, "the restarted kubelet's healthz", func() error {
		if gone, werr := n.kubelet.exited(); gone {
			return fmt.Errorf("the kubelet exited (%v):\n%s", werr, n.kubelet.logTail(4000))
		}
		// Not t.Context(): it has ended when a cleanup calls this.
		return httpOK(context.Background(), nsHTTPClient(n.ns), healthz, "")
	})
	t.Logf("kubelet restarted with clusterDNS %s: healthy after %v", clusterDNS, time.Since(start).Round(100*time.Millisecond))
}
