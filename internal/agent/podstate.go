package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodecache/nodecache/pkg/logkey"
)

// Pod-scoped state, in --pod-state-dir (an emptyDir in the DaemonSet: it
// lives as long as the pod, across restarts of its container, and no other
// pod sees it).
//
// A DaemonSet pod restarts its container whatever its exit code. So an agent
// that handed its sockets to a successor must not exit: the kubelet would
// start it again, and the old revision would take the sockets back from the
// new one. Instead it writes the superseded marker and idles until its pod
// is deleted; a restarted container of that pod finds the marker and idles
// too. The successor records the predecessor's pod UID and refuses to hand
// the sockets back to that pod, should the marker be lost.
//
// The kubelet probes through probe.sock, a unix socket in the same
// directory: on the host network both pods of a surge share every TCP port,
// so an HTTP probe of one pod could be answered by the other's process.
const (
	supersededFile  = "superseded"
	predecessorFile = "predecessor"
	probeSocketFile = "probe.sock"
)

// podState is the agent's view of --pod-state-dir; the zero value (no
// directory) keeps a host process's behaviour: exit after a handover.
type podState struct {
	dir string
	uid string // this pod's UID (--pod-uid), sent in the handover hello
}

func (p podState) enabled() bool { return p.dir != "" }

func (p podState) path(name string) string { return filepath.Join(p.dir, name) }

// read returns the pod UID recorded in the state file name, and whether
// the file exists.
func (p podState) read(name string) (string, bool) {
	if !p.enabled() {
		return "", false
	}
	b, err := os.ReadFile(p.path(name))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// superseded reports the successor's pod UID when this pod already handed
// its sockets over.
func (p podState) superseded() (string, bool) { return p.read(supersededFile) }

func (p podState) markSuperseded(successor string) error {
	return writeFileAtomic(p.path(supersededFile), []byte(successor+"\n"))
}

// predecessor is the pod UID this pod took the sockets from, if any.
func (p podState) predecessor() string {
	uid, _ := p.read(predecessorFile)
	return uid
}

func (p podState) recordPredecessor(uid string) error {
	if !p.enabled() || uid == "" {
		return nil
	}
	return writeFileAtomic(p.path(predecessorFile), []byte(uid+"\n"))
}

func writeFileAtomic(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// serveProbes serves /healthz and /readyz on the pod's probe socket until
// ctx ends.
func (a *Agent) serveProbes(ctx context.Context, mux http.Handler) error {
	if !a.pod.enabled() {
		<-ctx.Done()
		return nil
	}
	ln, err := listenRootSocket(ctx, a.pod.path(probeSocketFile), 0, a.log) // pod-private: no other agent there
	if err != nil {
		return fmt.Errorf("probe socket: %w", err)
	}
	h := &http.Server{Handler: mux, ReadHeaderTimeout: 2 * time.Second, ReadTimeout: 5 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 10 * time.Second, MaxHeaderBytes: 4 << 10}
	if err := serveUntil(ctx, h, ln, time.Second); err != nil {
		return fmt.Errorf("probe socket: %w", err)
	}
	return nil
}

// supersededMux answers the probes of an agent that handed over: alive, and
// not ready (it serves nothing), so that nothing restarts it.
func supersededMux(successor string) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "ok: handed over to pod %s; idle until this pod is deleted\n", successor)
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not ready: handed over to pod "+successor+"; this pod serves nothing", http.StatusServiceUnavailable)
	})
	return mux
}

// idleSuperseded is the whole life of an agent whose pod was superseded:
// probes only, no sockets, no host changes, exit 0 on SIGTERM.
func (a *Agent) idleSuperseded(ctx context.Context, successor string) error {
	a.log.Info("this pod handed its sockets to a successor; idle until the pod is deleted",
		"successor_pod", successor, "marker", a.pod.path(supersededFile))
	if err := a.serveProbes(ctx, supersededMux(successor)); err != nil {
		a.log.Error("probe socket unavailable", logkey.Err, err)
		<-ctx.Done()
	}
	a.log.Info("superseded agent stopping; interface and rules are the successor's")
	return nil
}

// swapHandler is an http.Handler whose target changes at run time.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	http.Error(w, "starting", http.StatusServiceUnavailable)
}

// containerRestart reports whether a SIGTERM stops only this container, not
// its pod: the kubelet restarting it after a failed liveness probe, say. The
// node then keeps its link and rules for the restarted agent; tearing them
// down would turn a restart into an outage. Only a pod being deleted
// (uninstall, a drained or evicted agent) tears down. Without the pod's
// name or the API server, the answer is no: tear down, as a host process
// does.
func (a *Agent) containerRestart() (bool, string) {
	if a.kube == nil || a.cfg.PodName == "" || a.cfg.PodNamespace == "" {
		return false, ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// A get of its own pod, in its own namespace: the grant for it is a
	// Role there (deploy/base/rbac.yaml), not a list of every pod.
	p, err := a.kube.CoreV1().Pods(a.cfg.PodNamespace).Get(ctx, a.cfg.PodName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, ""
	}
	if err != nil {
		a.log.Warn("cannot tell a container restart from a pod deletion; tearing down", logkey.Err, err)
		return false, ""
	}
	if p.DeletionTimestamp == nil && (a.pod.uid == "" || string(p.UID) == a.pod.uid) {
		return true, "pod " + a.cfg.PodNamespace + "/" + a.cfg.PodName + " is not being deleted (a container restart)"
	}
	return false, ""
}

// Probe asks the agent whose --pod-state-dir is dir, over its probe socket,
// whether it is alive (what "live", /healthz) or ready ("ready", /readyz):
// the client side of `nodecache probe`. It returns the agent's answer, and
// an error unless the status is 200.
func Probe(dir, what string, timeout time.Duration) ([]byte, error) {
	path := "/healthz"
	if what == "ready" {
		path = "/readyz"
	}
	sock := filepath.Join(dir, probeSocketFile)
	hc := &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}
	resp, err := hc.Get("http://agent" + path)
	if err != nil {
		return nil, fmt.Errorf("probe %s: agent not answering on %s: %w", what, sock, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("probe %s: %s", what, resp.Status)
	}
	return body, nil
}
