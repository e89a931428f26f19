package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodecache/nodecache/pkg/logkey"
)

// The admin and handover sockets hand out the agent's state, its DNS
// sockets and a way to stop it, so they are root's only:
//   - created 0600 by bind itself, under a umask of 0177 (no window in which
//     another user could connect, as with a chmod after bind);
//   - in a directory owned by root or this process's uid, inside such
//     directories all the way up, none writable by group or others unless
//     sticky (else another user could swap the socket, or the directory,
//     for their own): checkSocketDir, sockettrust.go;
//   - a path where another agent still listens is not deleted: it is waited
//     for (a predecessor exits after a handover), and replaced only once
//     nothing listens there;
//   - every connection's peer must be uid 0 or this process's uid
//     (SO_PEERCRED), checked on accept, and by a successor on the
//     predecessor it dials (dialTrusted), whose socket file must be root's
//     or ours too.

// umaskMu serialises umask changes: the umask is process-wide, and two
// sockets (or two in-process test agents) may be created at once.
var umaskMu sync.Mutex

// errSocketBusy is wrapped when another process still listens on the path.
var errSocketBusy = errors.New("another agent listens on the socket")

// listenRootSocket listens on the unix socket path for root (and this
// process's uid) only, creating its directory 0700 if needed. While
// another process listens there it retries until wait has passed. The path
// is not removed on close: a successor may already have replaced it.
func listenRootSocket(ctx context.Context, path string, wait time.Duration, log *slog.Logger) (*peerCheckListener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating directory for %s: %w", path, err)
	}
	if err := checkSocketDir(dir); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		err := removeStaleSocket(ctx, path)
		if err == nil {
			break
		}
		if !errors.Is(err, errSocketBusy) || !time.Now().Before(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	umaskMu.Lock()
	old := unix.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	unix.Umask(old)
	umaskMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	return &peerCheckListener{UnixListener: ln, log: log, self: os.Getuid()}, nil
}

// removeStaleSocket removes a socket file at path that nothing listens on.
// It returns nil when the path is free, and an error wrapping errSocketBusy
// when a process accepts connections there.
func removeStaleSocket(ctx context.Context, path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket (%v): refusing to replace it", path, fi.Mode().Type())
	}
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "unix", path)
	if err == nil {
		_ = c.Close()
		return fmt.Errorf("%s: %w", path, errSocketBusy)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("checking whether an agent listens on %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	return nil
}

// peerCheckListener accepts only peers running as root or as this
// process's uid; others are closed at once, with one log line each.
type peerCheckListener struct {
	*net.UnixListener
	log  *slog.Logger
	self int
}

// Accept returns the next connection from an allowed peer.
func (l *peerCheckListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(c)
		if err == nil && (uid == 0 || uid == l.self) {
			return c, nil
		}
		l.log.Warn("refusing a connection on a root-only socket", "socket", l.Addr().String(), "peer_uid", uid, logkey.Err, err)
		_ = c.Close()
	}
}

// peerUID is the uid of the process at the other end of c (SO_PEERCRED).
func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if serr != nil {
		return -1, fmt.Errorf("reading peer credentials: %w", serr)
	}
	return int(cred.Uid), nil
}
