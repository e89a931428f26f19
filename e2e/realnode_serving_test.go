//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// checkServingKill SIGKILLs the agent's serving process, the child of the
// supervisor that is the container's first process: the supervisor starts
// another on the kept sockets, so the container is not restarted (its
// restartCount stays) and the client's queries wait instead of failing.
func (n *realNode) checkServingKill(ctx context.Context, client *corev1.Pod) {
	t := n.t
	agent, supervisor, serving := n.servingProcess(ctx)
	checkBinaries(t, supervisor, serving) // the image's supervisor binary, exec'd by `nodecache run`
	before := restartCount(&agent)
	killedAt := time.Now()
	if err := syscall.Kill(serving, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", serving, err)
	}
	var next int
	eventuallyWithin(t, 30*time.Second, "a new serving process", func() error {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/stat", supervisor)); err != nil {
			return fmt.Errorf("supervisor %d gone: %w", supervisor, err)
		}
		k := children(supervisor)
		if len(k) != 1 || k[0] == serving {
			return fmt.Errorf("supervisor's children %v (killed %d)", k, serving)
		}
		next = k[0]
		return nil
	})
	firstAnswer := n.untilAnswer(killedAt)
	time.Sleep(5 * time.Second) // the client's last seconds answer or time out, the kubelet looks again
	w := summarize(n.clientSeconds(client), killedAt.Add(-time.Second), killedAt.Add(firstAnswer+2*time.Second))
	after := n.waitAgents(ctx, 1, time.Minute)[0]
	t.Logf("serving process killed: kill -9 of pid %d (supervisor %d kept, new serving pid %d): first answer after %v; "+
		"restartCount %d -> %d; client around it %s", serving, supervisor, next, firstAnswer.Round(time.Millisecond),
		before, restartCount(&after), w)
	if got := restartCount(&after); got != before || after.UID != agent.UID {
		t.Errorf("after the serving process's kill: pod %s restartCount %d, want the same pod with %d (the supervisor restarts the process, not the kubelet the container)",
			after.Name, got, before)
	}
	if w.lost > 0 || w.rcodes["error"] > 0 {
		t.Errorf("client around the serving process's kill: %s, want nothing lost and no error", w)
	}
	if err := n.hostStateProblems(); err != nil {
		t.Errorf("after the serving process's kill: %v", err)
	}
}

// servingProcess is the agent's pod, its container's supervisor and the
// supervisor's one child, the serving process.
func (n *realNode) servingProcess(ctx context.Context) (corev1.Pod, int, int) {
	agent := n.waitAgents(ctx, 1, time.Minute)[0]
	supervisor := n.agentPID(ctx, &agent)
	kids := children(supervisor)
	if len(kids) != 1 {
		n.t.Fatalf("the agent container's supervisor %d has children %v, want one serving process", supervisor, kids)
	}
	return agent, supervisor, kids[0]
}
