//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What docs/operating.md's troubleshooting section tells an operator to
// run on a live cluster: the CLI inside the agent's pod with `kubectl
// exec`, and in a node debugging pod with `kubectl debug node/...`.

// doctorFinding is one line of `nodecache doctor -o json`.
type doctorFinding struct {
	Check, Severity, Detail, Fix string
}

// checkExecTroubleshooting runs status, top, tail and doctor in the agent's
// pod and wants each to see the node and the client's queries.
func (n *realNode) checkExecTroubleshooting(ctx context.Context, agent, client *corev1.Pod) {
	t := n.t
	out, err := n.exec(ctx, agent, "nodecache", "status")
	if err != nil {
		t.Errorf("kubectl exec nodecache status: %v", err)
	}
	t.Logf("kubectl exec %s -- nodecache status:\n%s", agent.Name, out)
	for _, want := range []string{"serving, ready", "nodelocaldns ok", "synced"} {
		if !strings.Contains(out, want) {
			t.Errorf("nodecache status in the pod: want %q in it", want)
		}
	}

	out, err = n.exec(ctx, agent, "nodecache", "top", "--once")
	if err != nil {
		t.Errorf("kubectl exec nodecache top --once: %v", err)
	}
	t.Logf("kubectl exec %s -- nodecache top --once:\n%s", agent.Name, out)
	if ip := client.Status.PodIP; ip == "" || !strings.Contains(out, ip) {
		t.Errorf("nodecache top --once in the pod: want the client pod's IP %q among the clients", ip)
	}

	// tail streams until stopped: kubectl exec ends after a few seconds of
	// the client's queries (40 a second).
	tctx, cancel := context.WithTimeout(ctx, 6*time.Second)
	out, err = n.exec(tctx, agent, "nodecache", "tail", "--suffix", clientNS+".svc.cluster.local")
	cancel()
	lines := strings.Count(out, "web."+clientNS+".svc.cluster.local")
	var ended string
	if err != nil {
		ended = firstLines(err.Error(), 1)
	}
	t.Logf("kubectl exec %s -- nodecache tail (6 s): %d lines for web.%s (ended: %s); first lines:\n%s", agent.Name, lines, clientNS, ended, firstLines(out, 5))
	if lines == 0 {
		t.Errorf("nodecache tail in the pod showed none of the client's queries for web.%s.svc.cluster.local", clientNS)
	}

	findings, raw := n.doctorInPod(ctx, agent)
	t.Logf("kubectl exec %s -- nodecache doctor:\n%s", agent.Name, raw)
	n.wantDoctor(findings, "in the agent's pod")
}

// doctorInPod runs `nodecache doctor -o json` in the agent's pod. Its exit
// status is 5 with warnings, 4 with failures: the findings say which.
func (n *realNode) doctorInPod(ctx context.Context, agent *corev1.Pod) ([]doctorFinding, string) {
	out, err := n.exec(ctx, agent, "nodecache", "doctor", "-o", "json")
	return n.parseDoctor(out, err)
}

func (n *realNode) parseDoctor(out string, runErr error) ([]doctorFinding, string) {
	// A pod's log interleaves its stdout and stderr line by line in no set
	// order: the CLI's closing "nodecache: doctor: ..." line on stderr can
	// land inside the JSON on stdout.
	var kept []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "nodecache: ") {
			kept = append(kept, l)
		}
	}
	out = strings.Join(kept, "\n")
	start := strings.Index(out, "[")
	var fs []doctorFinding
	if start < 0 || json.Unmarshal([]byte(out[start:strings.LastIndex(out, "]")+1]), &fs) != nil {
		n.t.Errorf("nodecache doctor -o json: no findings in its output (%v):\n%s", runErr, out)
		return nil, out
	}
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%-5s %-20s %s\n", f.Severity, f.Check, f.Detail)
	}
	return fs, b.String()
}

// wantDoctor wants no FAIL, and OK for what the pod can see of the node:
// the agent, its link and rules, kubelet's clusterDNS, the listeners.
func (n *realNode) wantDoctor(fs []doctorFinding, where string) {
	t := n.t
	sev := map[string]string{}
	for _, f := range fs {
		if f.Severity == "FAIL" {
			t.Errorf("nodecache doctor %s: FAIL %s: %s", where, f.Check, f.Detail)
		}
		if prev, seen := sev[f.Check]; !seen || prev == "OK" {
			sev[f.Check] = f.Severity
		}
	}
	for _, check := range []string{"agent", "interface", "rules", "kubelet", "listener"} {
		if sev[check] != "OK" {
			t.Errorf("nodecache doctor %s: check %s is %q, want OK", where, check, sev[check])
		}
	}
}

var debugPodName = regexp.MustCompile(`debugging pod (\S+) with container`)

// checkDebugNode runs docs/operating.md's `kubectl debug node/...` recipe:
// the agent's image in a pod on the node's namespaces with the node's root
// at /host, running status and doctor against the agent's admin socket.
func (n *realNode) checkDebugNode(ctx context.Context) {
	t := n.t
	sock := "/host" + filepath.Join(n.dir, "run-nodecache", "admin.sock")
	for _, argv := range [][]string{
		{"nodecache", "status", "--admin-socket", sock},
		{"nodecache", "doctor", "-o", "json", "--admin-socket", sock, "--kubelet-config", "/host" + filepath.Join(n.dir, "kubelet", "config.yaml")},
	} {
		args := append([]string{"debug", "node/" + nodeName, "-n", "default", "--profile=sysadmin",
			"--image=" + agentImage(agentImageTags[0]), "--image-pull-policy=Never", "--"}, argv...)
		out, err := n.kubectl(ctx, args...)
		if err != nil {
			t.Errorf("kubectl debug node: %v", err)
			continue
		}
		m := debugPodName.FindStringSubmatch(out)
		if m == nil {
			t.Errorf("kubectl debug node printed no pod name:\n%s", out)
			continue
		}
		pod := m[1]
		logs, phase := n.waitPodDone(ctx, "default", pod)
		if _, err := n.kubectl(context.Background(), "delete", "pod", "-n", "default", pod, "--wait=false"); err != nil {
			t.Errorf("deleting the debug pod: %v", err)
		}
		t.Logf("kubectl %s: pod %s %s:\n%s", strings.Join(args, " "), pod, phase, logs)
		switch argv[1] {
		case "status":
			if phase != corev1.PodSucceeded || !strings.Contains(logs, "serving, ready") {
				t.Errorf("nodecache status in kubectl debug node: pod %s, want Succeeded and the agent serving, ready", phase)
			}
		case "doctor":
			// Exit 5 (warnings: this rig's upstream is on loopback) fails
			// the pod; the findings say whether anything failed.
			fs, raw := n.parseDoctor(logs, nil)
			t.Logf("doctor in kubectl debug node:\n%s", raw)
			n.wantDoctor(fs, "in kubectl debug node")
		}
	}
}

// waitPodDone waits until the pod has run to its end and returns its
// container's log and its phase.
func (n *realNode) waitPodDone(ctx context.Context, ns, name string) (string, corev1.PodPhase) {
	var phase corev1.PodPhase
	eventuallyWithin(n.t, 2*time.Minute, "pod "+name+" done", func() error {
		p, err := n.admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		phase = p.Status.Phase
		if phase != corev1.PodSucceeded && phase != corev1.PodFailed {
			return fmt.Errorf("pod %s is %s: %s", name, phase, podWhy(p))
		}
		return nil
	})
	logs, err := n.kubectl(ctx, "logs", "-n", ns, name)
	if err != nil {
		n.t.Errorf("logs of %s: %v", name, err)
	}
	return logs, phase
}

func firstLines(s string, k int) string {
	lines := strings.SplitN(s, "\n", k+1)
	if len(lines) > k {
		lines = lines[:k]
	}
	return strings.Join(lines, "\n")
}
