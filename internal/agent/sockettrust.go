package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Who may own the agent's sockets, their directories, and the process at
// the other end: root and the agent's own uid. Anyone else who could place
// a socket where the agent looks for its predecessor would be handed the
// agent's trust: it would take "its" DNS sockets and cache from them.

// trustedUID reports whether uid is root or this process's uid.
func trustedUID(uid int) bool { return uid == 0 || uid == os.Getuid() }

// checkSocketDir refuses a directory where someone other than root or this
// process's uid could place or swap a socket: the directory, or any
// directory above it (after symlinks), owned by another uid, or writable by
// group or others while neither sticky nor root's. (A directory root made
// writable for all is root's choice: a pod's emptyDir is 0777 and only the
// pod's containers see it.)
func checkSocketDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("checking directory %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("checking directory %s: %w", dir, err)
	}
	for d := real; ; d = filepath.Dir(d) {
		if err := checkDirEntry(dir, d); err != nil {
			return err
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// checkDirEntry checks d, the socket directory dir or one above it.
func checkDirEntry(dir, d string) error {
	fi, err := os.Stat(d)
	if err != nil {
		return fmt.Errorf("checking directory %s: %w", d, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok {
		return fmt.Errorf("socket directory %s: %s is not a directory", dir, d)
	}
	which := "socket directory " + dir
	if d != dir {
		which += ": its parent " + d
	}
	if !trustedUID(int(st.Uid)) {
		return fmt.Errorf("%s is owned by uid %d, not root or this agent's uid %d: its owner could replace the socket; "+
			"use a directory root owns", which, st.Uid, os.Getuid())
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 && st.Uid != 0 {
		return fmt.Errorf("%s is writable by group or others (mode %v), not sticky and owned by uid %d, not root: "+
			"another user could replace the socket; chmod go-w it", which, fi.Mode().Perm(), st.Uid)
	}
	return nil
}

// dialTrusted dials the unix socket path when root or this process's uid
// owns it, its directories pass checkSocketDir, and the process listening
// there runs as root or this process's uid (SO_PEERCRED). It returns nil,
// nil when nothing is there to dial.
func dialTrusted(ctx context.Context, path string) (*net.UnixConn, error) {
	if err := checkSocketDir(filepath.Dir(path)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checking %s: %w", path, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Type() != fs.ModeSocket || !ok {
		return nil, fmt.Errorf("%s is not a socket (%v)", path, fi.Mode().Type())
	}
	if !trustedUID(int(st.Uid)) {
		return nil, fmt.Errorf("socket %s is owned by uid %d, not root or this agent's uid %d", path, st.Uid, os.Getuid())
	}
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, nil
		}
		return nil, fmt.Errorf("dialing %s: %w", path, err)
	}
	conn := c.(*net.UnixConn)
	uid, err := peerUID(conn)
	if err != nil || !trustedUID(uid) {
		_ = conn.Close()
		return nil, fmt.Errorf("the process listening on %s runs as uid %d, not root or this agent's uid %d: refusing it (%v)",
			path, uid, os.Getuid(), err)
	}
	return conn, nil
}
