package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Listeners are the sockets a Server reads from. They are made by Listen, or
// rebuilt by FromFiles from descriptors a predecessor handed over.
type Listeners struct {
	UDP []*net.UDPConn
	TCP []*net.TCPListener
}

// Listen opens UDP sockets (perAddr each, SO_REUSEPORT; 0 means one per
// CPU, see SocketsPerCPU) and one TCP listener for every address. On error
// nothing stays open.
func Listen(ctx context.Context, addrs []netip.AddrPort, perAddr int) (*Listeners, error) {
	if perAddr <= 0 {
		perAddr = SocketsPerCPU()
	}
	l := &Listeners{}
	for _, a := range addrs {
		if err := l.addUDP(ctx, a, perAddr); err != nil {
			l.Close()
			return nil, err
		}
		ln, err := listenConfig.Listen(ctx, "tcp"+family(a), a.String())
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("listening on tcp %s: %w", a, err)
		}
		l.TCP = append(l.TCP, ln.(*net.TCPListener))
	}
	return l, nil
}

// SocketsPerCPU is how many UDP sockets an address gets by default: one
// per CPU the Go runtime runs on (GOMAXPROCS, which follows the
// container's CPU limit), each with its own read loop, so that the
// kernel's SO_REUSEPORT hashing spreads clients over every core.
func SocketsPerCPU() int { return runtime.GOMAXPROCS(0) }

var listenConfig = net.ListenConfig{Control: reusePort} //nolint:gochecknoglobals // never mutated

func family(a netip.AddrPort) string {
	if a.Addr().Is6() && !a.Addr().Is4In6() {
		return "6"
	}
	return "4"
}

// addUDP opens n more SO_REUSEPORT UDP sockets on a.
func (l *Listeners) addUDP(ctx context.Context, a netip.AddrPort, n int) error {
	for i := 0; i < n; i++ {
		pc, err := listenConfig.ListenPacket(ctx, "udp"+family(a), a.String())
		if err != nil {
			return fmt.Errorf("listening on udp %s: %w", a, err)
		}
		u := pc.(*net.UDPConn)
		growReceiveBuffer(u)
		l.UDP = append(l.UDP, u)
	}
	return nil
}

// topUp opens UDP sockets on every address that has fewer than perAddr,
// so that a successor running on more CPUs than its predecessor (or taking
// over from a version that opened one socket per address) still reads with
// one loop per CPU. Sockets it already has are kept: closing a
// SO_REUSEPORT socket drops the queries queued on it.
func (l *Listeners) topUp(ctx context.Context, perAddr int) error {
	count := map[netip.AddrPort]int{}
	for _, c := range l.UDP {
		count[c.LocalAddr().(*net.UDPAddr).AddrPort()]++
	}
	for _, a := range l.Addrs() {
		if err := l.addUDP(ctx, a, perAddr-count[a]); err != nil {
			return err
		}
	}
	return nil
}

func reusePort(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		if serr == nil {
			// Replies may leave before the address is configured on the
			// interface during start-up ordering; binding must not need it.
			serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1)
		}
	})
	if err != nil {
		return err
	}
	return serr
}

// udpReceiveBuffer is what each UDP socket asks for: the default 208 KiB
// holds about 300 queries, so a 30 ms pause (GC, a busy core) overflows it
// and the kernel drops queries.
const udpReceiveBuffer = 4 << 20

// growReceiveBuffer raises the socket's receive buffer past rmem_max when the
// agent may (CAP_NET_ADMIN: SO_RCVBUFFORCE), else up to rmem_max.
func growReceiveBuffer(c *net.UDPConn) {
	raw, err := c.SyscallConn()
	if err == nil {
		var serr error
		err = raw.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, udpReceiveBuffer)
		})
		if err == nil && serr == nil {
			return
		}
	}
	_ = c.SetReadBuffer(udpReceiveBuffer) // best effort: capped at rmem_max
}

// Close closes every socket. It is safe to call more than once.
func (l *Listeners) Close() {
	for _, c := range l.UDP {
		_ = c.Close()
	}
	for _, c := range l.TCP {
		_ = c.Close()
	}
}

// Files duplicates every socket's descriptor, UDP first then TCP, for a
// handover to a successor process. The caller closes the files.
func (l *Listeners) Files() ([]*os.File, error) {
	var files []*os.File
	fail := func(err error) ([]*os.File, error) {
		for _, f := range files {
			_ = f.Close()
		}
		return nil, err
	}
	for _, c := range l.UDP {
		f, err := c.File()
		if err != nil {
			return fail(fmt.Errorf("duplicating udp socket %s: %w", c.LocalAddr(), err))
		}
		files = append(files, f)
	}
	for _, c := range l.TCP {
		f, err := c.File()
		if err != nil {
			return fail(fmt.Errorf("duplicating tcp socket %s: %w", c.Addr(), err))
		}
		files = append(files, f)
	}
	return files, nil
}

// FromFiles rebuilds listeners from descriptors received from a predecessor,
// and opens more UDP sockets on an address that came with fewer than one per
// CPU. It takes ownership of files and closes them (the net package dups
// them).
func FromFiles(files []*os.File) (*Listeners, error) {
	l := &Listeners{}
	var errs []error
	for _, f := range files {
		if c, err := net.FilePacketConn(f); err == nil {
			if u, ok := c.(*net.UDPConn); ok {
				l.UDP = append(l.UDP, u)
			} else {
				_ = c.Close()
				errs = append(errs, fmt.Errorf("descriptor %s is not a UDP socket", f.Name()))
			}
		} else if ln, err := net.FileListener(f); err == nil {
			if t, ok := ln.(*net.TCPListener); ok {
				l.TCP = append(l.TCP, t)
			} else {
				_ = ln.Close()
				errs = append(errs, fmt.Errorf("descriptor %s is not a TCP listener", f.Name()))
			}
		} else {
			errs = append(errs, fmt.Errorf("descriptor %s is neither UDP nor TCP listener: %w", f.Name(), err))
		}
		_ = f.Close()
	}
	if err := errors.Join(errs...); err != nil {
		l.Close()
		return nil, fmt.Errorf("rebuilding handed-over listeners: %w", err)
	}
	if err := l.topUp(context.Background(), SocketsPerCPU()); err != nil {
		l.Close()
		return nil, fmt.Errorf("adding sockets to handed-over listeners: %w", err)
	}
	return l, nil
}

// Addrs returns the distinct addresses the listeners serve.
func (l *Listeners) Addrs() []netip.AddrPort {
	seen := map[netip.AddrPort]bool{}
	var out []netip.AddrPort
	for _, c := range l.UDP {
		a := c.LocalAddr().(*net.UDPAddr).AddrPort()
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}
