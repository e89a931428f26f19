//go:build e2e

package e2e

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tcpForwarder accepts connections on a listener that lives in one netns
// and pipes each to target, dialled from the test process's own (host)
// netns. It lets an agent in a node netns reach the apiserver that listens
// on the host's 127.0.0.1 only.
type tcpForwarder struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup
	paused atomic.Bool // when set, new connections are closed at once

	mu     sync.Mutex // guards following
	conns  map[net.Conn]struct{}
	closed bool
}

// forwardTCP listens on 127.0.0.1:0 inside ns and forwards to target;
// cleanup stops it.
func forwardTCP(t testing.TB, ns *netNS, target string) *tcpForwarder {
	t.Helper()
	l, err := ns.listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("forwarder listen in %s: %v", ns.Name, err)
	}
	f := &tcpForwarder{l: l, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(f.Close)
	return f
}

// Addr is the listening address, valid inside the netns.
func (f *tcpForwarder) Addr() string { return f.l.Addr().String() }

// Pause makes the target unreachable for new connections and cuts the open
// ones; Resume undoes it.
func (f *tcpForwarder) Pause() {
	f.paused.Store(true)
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		_ = c.Close()
	}
}

// Resume lets new connections through again.
func (f *tcpForwarder) Resume() { f.paused.Store(false) }

func (f *tcpForwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // transient accept error (EMFILE)
			continue
		}
		if f.paused.Load() {
			_ = c.Close()
			continue
		}
		if !f.track(c) {
			_ = c.Close()
			return
		}
		f.wg.Add(1)
		go f.pipe(c)
	}
}

func (f *tcpForwarder) pipe(in net.Conn) {
	defer f.wg.Done()
	defer f.untrack(in)
	out, err := net.DialTimeout("tcp", f.target, 5*time.Second)
	if err != nil {
		return
	}
	if !f.track(out) {
		_ = out.Close()
		return
	}
	defer f.untrack(out)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(out, in)
		closeWrite(out)
		close(done)
	}()
	_, _ = io.Copy(in, out)
	closeWrite(in)
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

func (f *tcpForwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *tcpForwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	_ = c.Close()
}

// Close stops accepting, closes every open connection and waits for all
// goroutines. It is idempotent.
func (f *tcpForwarder) Close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	_ = f.l.Close()
	f.wg.Wait()
}
