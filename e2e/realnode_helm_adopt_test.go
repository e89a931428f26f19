//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// checkAdoption moves a `kubectl apply -k` install to Helm the way
// docs/operating.md says: `helm install --take-ownership --force-conflicts`
// adopts the objects (server-side apply takes the fields kubectl's
// client-side apply owned) and rolls the DaemonSet to the chart's pod
// template with the socket handover. The client's queries must
// not notice; `helm uninstall` then leaves the node clean.
func (n *realNode) checkAdoption(t *testing.T, h *helmRig, client *corev1.Pod, metricsPort int) {
	t.Helper()
	ctx := t.Context()
	overlay := n.writeOverlay(t, metricsPort, agentImageTags[0])
	t.Cleanup(func() { n.uninstallAgent(t, overlay) }) // after a failure: the objects, Helm's or not
	if _, err := n.kubectl(ctx, "apply", "-k", overlay); err != nil {
		t.Fatalf("kubectl apply -k: %v", err)
	}
	n.waitAgents(ctx, 1, 3*time.Minute)
	time.Sleep(5 * time.Second) // answering again: the window below starts with the agent serving

	// The chart's metrics port as the base's Service has it (the overlay
	// moves only the agent's listener), so the Service stays as it is.
	from := time.Now()
	if out, err := h.run(ctx, "install", "nodecache", h.chart, "-n", agentNS, "-f", h.writeValues(t, 9253),
		"--take-ownership", "--force-conflicts"); err != nil {
		t.Fatalf("helm install over the kubectl apply -k objects: %v", err)
	} else {
		t.Logf("helm install --take-ownership --force-conflicts:\n%s", out)
	}
	if _, err := n.kubectl(ctx, "-n", agentNS, "rollout", "status", "daemonset/nodecache", "--timeout=3m"); err != nil {
		n.logAgents(ctx)
		t.Fatalf("the rollout to the chart's pods: %v", err)
	}
	agent := n.waitAgents(ctx, 1, 2*time.Minute)[0]
	to := time.Now()
	t.Logf("agent pod after the adoption: %s", agent.Name)
	if labels, err := n.kubectl(ctx, "-n", agentNS, "get", "daemonset", "nodecache", "-o", "jsonpath={.metadata.labels}"); err != nil || !strings.Contains(labels, "helm.sh/chart") {
		t.Errorf("DaemonSet labels after helm install: %s (%v), want the chart's (helm.sh/chart)", labels, err)
	}
	if err := n.hostStateProblems(); err != nil {
		t.Errorf("after the adoption: %v", err)
	}
	time.Sleep(3 * time.Second) // the last second's queries answer or time out
	w := summarize(n.clientSeconds(client), from, to)
	t.Logf("adoption by helm install (%v): %s", to.Sub(from).Round(100*time.Millisecond), w)
	if w.sent < 40 || w.lost != 0 || w.rcodes["SERVFAIL"] != 0 || w.rcodes["error"] != 0 || w.resent != 0 {
		t.Errorf("client during the adoption: sent %d, lost %d, SERVFAIL %d, errors %d, TCP resent %d (%s); want queries sent and none lost", w.sent, w.lost, w.rcodes["SERVFAIL"], w.rcodes["error"], w.resent, w.firstErr)
	}
	if out, err := h.run(ctx, "list", "-n", agentNS, "-q"); err != nil || out != "nodecache\n" {
		t.Errorf("helm list after adoption: %q (%v), want the release nodecache", out, err)
	}
	h.uninstall(t)
}
