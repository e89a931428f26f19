//go:build linux

package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func listenSocket(t *testing.T, path string, wait time.Duration) (net.Listener, error) {
	t.Helper()
	ln, err := listenRootSocket(context.Background(), path, wait, discardLog())
	if err == nil {
		t.Cleanup(func() { _ = ln.Close() })
	}
	return ln, err
}

func TestRootSocketIsCreated0600(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "admin.sock")
	if _, err := listenSocket(t, path, 0); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode: got %v, want a socket 0600", fi.Mode())
	}
	dir, _ := os.Stat(filepath.Dir(path))
	if dir.Mode().Perm() != 0o700 {
		t.Errorf("created directory mode: got %v, want 0700", dir.Mode().Perm())
	}
	old := unix.Umask(0o022)
	unix.Umask(old)
	if old&0o177 == 0o177 {
		t.Errorf("umask after listening: got %#o, want the process's own back", old)
	}
}

// TestRootSocketLeavesALiveAgent: a path where another agent listens is
// neither removed nor taken over; it is taken once that agent is gone.
func TestRootSocketLeavesALiveAgent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "handover.sock")
	live, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	live.SetUnlinkOnClose(false)
	if _, err := listenSocket(t, path, 0); !errors.Is(err, errSocketBusy) {
		t.Fatalf("listening where an agent listens: got %v, want errSocketBusy", err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the live agent's socket after the attempt: got %v, want it still reachable", err)
	}
	_ = c.Close()

	// The predecessor exits while we wait: then the path is ours.
	errc := make(chan error, 1)
	go func() {
		_, err := listenSocket(t, path, 30*time.Second)
		errc <- err
	}()
	_ = live.Close()
	if err := <-errc; err != nil {
		t.Fatalf("after the live agent closed: got %v, want the path taken over", err)
	}
}

func TestRootSocketReplacesOnlyAStaleSocket(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	_ = ln.Close() // a crashed agent's socket file
	if _, err := listenSocket(t, stale, 0); err != nil {
		t.Errorf("over a stale socket: got %v, want it replaced", err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := listenSocket(t, file, 0); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("over a regular file: got %v, want a refusal", err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "data" {
		t.Errorf("the regular file after the refusal: got %q, %v, want it intact", b, err)
	}
}

func TestRootSocketDirectoryMode(t *testing.T) {
	requireRoot(t, "giving a directory to another uid")
	tests := []struct {
		name string
		uid  int
		mode os.FileMode
		want string // in the error; empty: the socket is made
	}{
		{"root 0700", 0, 0o700, ""},
		{"root 1777 (like /tmp)", 0, os.ModeSticky | 0o777, ""},
		{"root 0777, not sticky (a pod's emptyDir)", 0, 0o777, ""},
		{"other uid 0700", 65534, 0o700, "owned by uid 65534"},
		{"other uid 0755", 65534, 0o755, "owned by uid 65534"},
		{"other uid 1777", 65534, os.ModeSticky | 0o777, "owned by uid 65534"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dir, tc.uid, tc.uid); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, tc.mode); err != nil {
				t.Fatal(err)
			}
			_, err := listenSocket(t, filepath.Join(dir, "admin.sock"), 0)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want the socket made", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestRootSocketChecksPeerCredentials: a process of another uid that can
// reach the socket (here made 0666 on purpose) is closed unserved; root is
// served.
func TestRootSocketChecksPeerCredentials(t *testing.T) {
	requireRoot(t, "running a peer as another uid")
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // the peer must reach the socket
		if err := os.Chmod(d, 0o755); err != nil { //nolint:gosec // G302: on purpose, for the other uid
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "admin.sock")
	ln, err := listenSocket(t, path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil { //nolint:gosec // G302: on purpose: only the credentials check stands in the way
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "served") }),
		ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	bin := filepath.Join(dir, "peer.test")
	if err := copyFile(os.Args[0], bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, uid := range []uint32{65534, 0} {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), dialEnv+"="+path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("peer uid %d: %v: %s", uid, err, out)
		}
		if served := strings.Contains(string(out), "served"); served != (uid == 0) {
			t.Errorf("peer uid %d: got %s, want served=%v", uid, out, uid == 0)
		}
	}
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}

// requireRoot skips t without root, saying why, or fails it under CI=true,
// where the tests run as root and a skip would hide a missing check.
func requireRoot(t *testing.T, what string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s needs root, and CI=true forbids skipping", what)
	}
	t.Skipf("skipping: %s needs root (CI=true makes this a failure)", what)
}
