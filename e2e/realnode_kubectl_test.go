//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a user does with kubectl against a pod of the real node: exec, logs
// and port-forward go from kubectl to the API server, from the API server to
// the kubelet by the node's InternalIP (with the API server's kubelet client
// certificate), and from the kubelet to containerd's streaming server.

// exec runs argv in the pod's first container with `kubectl exec`.
func (n *realNode) exec(ctx context.Context, p *corev1.Pod, argv ...string) (string, error) {
	return n.execIn(ctx, p, p.Spec.Containers[0].Name, argv...)
}

// execIn runs argv in the named container of p with `kubectl exec`.
func (n *realNode) execIn(ctx context.Context, p *corev1.Pod, container string, argv ...string) (string, error) {
	args := []string{"exec", "-n", p.Namespace, p.Name, "-c", container, "--"}
	return n.kubectl(ctx, append(args, argv...)...)
}

// podLogs is `kubectl logs` of the pod's first container.
func (n *realNode) podLogs(ctx context.Context, p *corev1.Pod) (string, error) {
	return n.kubectl(ctx, "logs", "-n", p.Namespace, p.Name, "-c", p.Spec.Containers[0].Name)
}

var forwardingFrom = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) ->`)

// portForward runs `kubectl port-forward` to the pod's port and returns the
// local address it listens on; stop ends it.
func (n *realNode) portForward(ctx context.Context, p *corev1.Pod, port int) (addr string, stop func(), err error) {
	cmd := exec.CommandContext(ctx, "kubectl", "--kubeconfig", n.api.AdminKubeconfig, "port-forward",
		"-n", p.Namespace, "pod/"+p.Name, "--address", "127.0.0.1", fmt.Sprintf(":%d", port))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, fmt.Errorf("kubectl port-forward: %w", err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("kubectl port-forward: %w", err)
	}
	stop = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := forwardingFrom.FindStringSubmatch(sc.Text()); m != nil {
				found <- "127.0.0.1:" + m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case addr = <-found:
		return addr, stop, nil
	case <-time.After(30 * time.Second):
		stop()
		return "", nil, fmt.Errorf("kubectl port-forward to %s/%s:%d printed no local port in 30s: %s", p.Namespace, p.Name, port, stderr.String())
	}
}

// namespace creates a namespace for t and deletes it, waiting until it is
// gone, when t ends: a test leaves the shared node as it found it.
func (n *realNode) namespace(t testing.TB, name string) {
	t.Helper()
	ctx := t.Context()
	if _, err := n.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := n.admin.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", name, err)
			return
		}
		err := poll(ctx, 500*time.Millisecond, n.cm, func(ctx context.Context) error {
			_, err := n.admin.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("namespace %s still there (%v)", name, err)
		})
		if err != nil {
			t.Errorf("waiting for namespace %s to go: %v", name, err)
		}
	})
}
