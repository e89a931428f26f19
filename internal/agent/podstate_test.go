package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodecache/nodecache/internal/agent/agenttest"
)

// podAgentConfig is testAgentConfig for an agent in a pod: its own
// --pod-state-dir and --pod-uid, sharing the node's handover socket in dir.
func podAgentConfig(t *testing.T, up *agenttest.Upstream, dir string, port uint16, uid string) *Config {
	t.Helper()
	return testAgentConfig(t, up.Addr, dir, port, "--pod-state-dir", filepath.Join(t.TempDir(), uid), "--pod-uid", uid)
}

// probe runs `nodecache probe what` against cfg's pod state dir.
func probe(cfg *Config, what string) error {
	_, err := Probe(cfg.PodStateDir, what, 2*time.Second)
	return err
}

// TestPodHandoverIdlesAndNeverHandsBack plays a DaemonSet rollout on one
// node: pod A hands over to pod B and, instead of exiting (which would make
// the kubelet restart it), idles alive and not ready. A restart of A's
// container finds the marker and idles too; and should the marker be lost,
// B refuses to hand the sockets back to A's pod.
func TestPodHandoverIdlesAndNeverHandsBack(t *testing.T) {
	up := startUpstream(t)
	port := freePort(t)
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	cfgA := podAgentConfig(t, up, dir, port, "pod-a")
	a := startAgent(t, cfgA)
	if err := probe(cfgA, "ready"); err != nil {
		t.Fatalf("pod A before the rollout: %v", err)
	}
	cfgB := podAgentConfig(t, up, dir, port, "pod-b")
	cfgB.HealthAddr, cfgB.MetricsAddr = cfgA.HealthAddr, cfgA.MetricsAddr
	b := startAgent(t, cfgB)

	// A stays alive after the handover.
	if err := a.Wait(2 * time.Second); err == nil || !strings.Contains(err.Error(), "did not exit") {
		t.Fatalf("pod A's agent exited after the handover (%v); want it idle until its pod is deleted", err)
	}
	if err := probe(cfgA, "live"); err != nil {
		t.Errorf("pod A after the handover: liveness %v, want alive", err)
	}
	if err := probe(cfgA, "ready"); err == nil {
		t.Errorf("pod A after the handover: ready, want not ready (it serves nothing)")
	}
	if err := probe(cfgB, "ready"); err != nil {
		t.Errorf("pod B after the handover: %v, want ready", err)
	}
	if r := ask(t, addr, "web.demo.svc.cluster.local.", dns.TypeA); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("after the handover: got %s", dns.RcodeToString[r.Rcode])
	}
	if got, _ := os.ReadFile(filepath.Join(cfgA.PodStateDir, supersededFile)); strings.TrimSpace(string(got)) != "pod-b" {
		t.Errorf("pod A's superseded marker: got %q, want pod-b", got)
	}
	// SIGTERM to the idle pod: exit 0, host state untouched (B serves).
	if err := a.Stop(); err != nil {
		t.Fatalf("stopping idle pod A: %v", err)
	}

	// A's container restarts (a crash, an OOM kill, a node reboot of the
	// runtime): it idles without touching B's sockets.
	cfgA2 := podAgentConfig(t, up, dir, port, "pod-a")
	cfgA2.PodStateDir = cfgA.PodStateDir
	a2 := launchAgent(t, cfgA2)
	if err := a2.Wait(time.Second); err == nil || !strings.Contains(err.Error(), "did not exit") {
		t.Fatalf("restarted pod A exited (%v); want it idle", err)
	}
	if err := probe(cfgA2, "ready"); err == nil {
		t.Errorf("restarted pod A: ready, want not ready")
	}
	if err := b.Wait(500 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not exit") {
		t.Fatalf("pod B stopped (%v) when pod A's container restarted", err)
	}
	if err := probe(cfgB, "ready"); err != nil {
		t.Errorf("pod B after pod A restarted: %v", err)
	}
	_ = a2.Stop()

	// The marker is gone (say the emptyDir was recreated): B still refuses
	// to hand its sockets back to the pod it replaced.
	if err := os.Remove(filepath.Join(cfgA.PodStateDir, supersededFile)); err != nil {
		t.Fatal(err)
	}
	cfgA3 := podAgentConfig(t, up, dir, port, "pod-a")
	cfgA3.HealthAddr, cfgA3.MetricsAddr = cfgA.HealthAddr, cfgA.MetricsAddr
	a3 := launchAgent(t, cfgA3)
	if err := b.Wait(time.Second); err == nil || !strings.Contains(err.Error(), "did not exit") {
		t.Fatalf("pod B handed over to the pod it replaced (%v)", err)
	}
	if b.agent().successorSeen.Load() {
		t.Errorf("pod B counts its predecessor as a successor: it would keep host state for the wrong reason")
	}
	_ = a3.Stop()
	if r := ask(t, addr, "web.demo.svc.cluster.local.", dns.TypeA); r.Rcode != dns.RcodeSuccess {
		t.Fatalf("pod B after pod A came and went: got %s", dns.RcodeToString[r.Rcode])
	}
}

// TestSIGTERMTearsDownOnlyWhenThePodGoes: the kubelet sends SIGTERM both when
// it restarts a container and when the pod is deleted; only the second may
// remove the node's link and rules.
func TestSIGTERMTearsDownOnlyWhenThePodGoes(t *testing.T) {
	now := metav1.Now()
	pod := func(uid string, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "nodecache-x", UID: types.UID(uid)}}
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	cases := []struct {
		name string
		objs []runtime.Object
		uid  string
		keep bool
	}{
		{"container restart", []runtime.Object{pod("u1", false)}, "u1", true},
		{"pod being deleted", []runtime.Object{pod("u1", true)}, "u1", false},
		{"pod gone", nil, "u1", false},
		{"a new pod of the same name", []runtime.Object{pod("u2", false)}, "u1", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := &Config{PodName: "nodecache-x", PodNamespace: "kube-system"}
			a := newTestAgent(t, cfg)
			a.pod.uid = c.uid
			kube := fake.NewClientset(c.objs...)
			a.kube = kube
			if keep, why := a.keepHostState(); keep != c.keep {
				t.Errorf("keepHostState: got %v (%q), want %v", keep, why, c.keep)
			}
			// Its own pod, by name, in its namespace: what a Role grants,
			// without the list of every pod a ClusterRole would take.
			for _, act := range kube.Actions() {
				if act.GetResource().Resource == "pods" && (act.GetVerb() != "get" || act.GetNamespace() != "kube-system") {
					t.Errorf("pod access: got %s pods in %q, want only get in kube-system", act.GetVerb(), act.GetNamespace())
				}
			}
		})
	}
	// Outside a pod (no name, or no API server): tear down, as before.
	a := newTestAgent(t, &Config{})
	if keep, why := a.keepHostState(); keep {
		t.Errorf("host process: keepHostState got true (%q), want false", why)
	}
}
