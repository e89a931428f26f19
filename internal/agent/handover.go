package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodecache/nodecache/internal/handover"
	"github.com/nodecache/nodecache/pkg/logkey"
	"github.com/nodecache/nodecache/pkg/server"
)

// The agent's side of the socket handover; the protocol, its frames and
// who closes what are in internal/handover.

// reuseAddrPort lets a successor bind the HTTP ports while its predecessor
// still holds them.
func reuseAddrPort(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	return serr
}

// acquireListeners takes the listeners over from a running predecessor, or
// opens new ones. finish, when non-nil, completes the handover once the new
// server reads the sockets.
func (a *Agent) acquireListeners(ctx context.Context) (*server.Listeners, func(), error) {
	l, err := a.inheritedListeners()
	if err != nil || l != nil {
		a.keptSockets = l != nil // queries wait in these sockets
		return l, func() {}, err
	}
	l, conn, err := a.receiveHandover(ctx)
	if err != nil {
		a.log.Warn("no handover from the predecessor; opening new sockets", logkey.Err, err)
	}
	if l != nil {
		a.m.handovers.WithLabelValues("received").Inc()
		return l, func() { a.finishHandover(conn) }, nil
	}
	l, err = server.Listen(ctx, a.addrs, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("opening listeners (is another DNS server on %s?): %w", joinAddrs(a.addrs), err)
	}
	return l, nil, nil
}

// receiveHandover returns nil, nil, nil when there is no predecessor.
func (a *Agent) receiveHandover(ctx context.Context) (*server.Listeners, *net.UnixConn, error) {
	if a.cfg.HandoverSocket == "" {
		return nil, nil, nil
	}
	conn, err := dialTrusted(ctx, a.cfg.HandoverSocket)
	if err != nil || conn == nil {
		return nil, nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(a.cfg.HandoverWait))
	fail := func(err error) (*server.Listeners, *net.UnixConn, error) {
		_ = conn.Close()
		return nil, nil, err
	}
	if err := handover.WriteFrame(conn, handover.Msg{Op: handover.OpHello, Version: handover.Version, Pod: a.pod.uid}, nil); err != nil {
		return fail(fmt.Errorf("greeting predecessor: %w", err))
	}
	var offer handover.Msg
	files, err := handover.ReadFrame(conn, &offer)
	if err != nil {
		return fail(fmt.Errorf("reading predecessor's offer: %w", err))
	}
	want := make([]string, len(a.addrs))
	for i, ad := range a.addrs {
		want[i] = ad.String()
	}
	if err := handover.CheckOffer(offer, files, want); err != nil {
		return fail(err)
	}
	l, err := server.FromFiles(files)
	if err != nil {
		return fail(err)
	}
	if err := a.pod.recordPredecessor(offer.Pod); err != nil {
		a.log.Warn("recording the predecessor's pod", logkey.Err, err)
	}
	// The warm cache follows; a failure here costs hit rate, not the handover.
	if dump, size, err := handover.ReadCacheHeader(bufio.NewReader(conn)); err == nil && dump != nil {
		n, err := a.cache.Import(dump, time.Now().Add(a.cfg.HandoverWait))
		if err != nil {
			a.log.Warn("importing the predecessor's cache", logkey.Err, err, "imported", n)
		} else {
			a.log.Info("imported the predecessor's cache", "entries", n, "bytes", size)
		}
	}
	return l, conn, nil
}

// finishHandover tells the predecessor we serve, waits for it to stop, and
// takes the handover socket over for our own successor.
func (a *Agent) finishHandover(conn *net.UnixConn) {
	defer conn.Close()
	start := time.Now()
	_ = conn.SetDeadline(time.Now().Add(a.cfg.HandoverWait + 10*time.Second))
	if err := handover.WriteFrame(conn, handover.Msg{Op: handover.OpReady}, nil); err != nil {
		a.log.Warn("telling predecessor we serve", logkey.Err, err)
		return
	}
	var done handover.Msg
	if _, err := handover.ReadFrame(conn, &done); err != nil || done.Op != handover.OpDone {
		a.log.Warn("predecessor did not confirm the handover", logkey.Err, err, "op", done.Op)
		return
	}
	a.log.Info("took over from the predecessor", "wait", time.Since(start).Round(time.Millisecond))
}

// serveHandover waits for a successor and hands it the sockets and the warm
// cache; then it stops this agent without teardown.
func (a *Agent) serveHandover(ctx context.Context) error {
	path := a.cfg.HandoverSocket
	if path == "" {
		<-ctx.Done()
		return nil
	}
	// Root only: whoever connects receives the DNS sockets and stops us.
	ln, err := listenRootSocket(ctx, path, a.socketWait(), a.log)
	if err != nil {
		return fmt.Errorf("handover socket: %w", err)
	}
	go func() { <-ctx.Done(); _ = ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accepting successor: %w", err)
		}
		if a.handOver(ctx, c.(*net.UnixConn), ln.UnixListener) {
			close(a.handedOff)
			if a.sup != nil {
				if err := a.sup.HandedOver(); err != nil {
					a.log.Warn("the supervisor may restart this agent after the handover", logkey.Err, err)
				}
			}
			return errHandedOver
		}
	}
}

// socketWait is how long a new agent waits for its predecessor to release
// the admin and handover socket paths: the predecessor exits once it has
// handed over, within the bound finishHandover gives it.
func (a *Agent) socketWait() time.Duration { return a.cfg.HandoverWait + 10*time.Second }

// errHandedOver ends the agent's errgroup after a successful handover.
var errHandedOver = errors.New("handed over to a successor")

func (a *Agent) handOver(ctx context.Context, conn *net.UnixConn, ln *net.UnixListener) bool {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var hello handover.Msg
	_, err := handover.ReadFrame(conn, &hello)
	if errors.Is(err, io.EOF) { // a probe whether we listen (listenRootSocket), not a successor
		return false
	}
	if err != nil || hello.Op != handover.OpHello || hello.Version != handover.Version {
		a.log.Warn("refusing a successor's handover", "op", hello.Op, "version", hello.Version, logkey.Err, err)
		return false
	}
	if hello.Pod != "" && hello.Pod == a.pod.predecessor() {
		// A restarted container of the pod this agent replaced: the
		// sockets never go back to an older revision.
		a.log.Warn("refusing a handover to the pod this agent took over from", "pod", hello.Pod)
		_ = handover.WriteFrame(conn, handover.Msg{Op: handover.OpError, Error: "this pod was superseded by pod " + a.pod.uid}, nil)
		return false
	}
	a.successorSeen.Store(true)
	l := a.server.Listeners()
	files, err := l.Files()
	if err != nil {
		_ = handover.WriteFrame(conn, handover.Msg{Op: handover.OpError, Error: err.Error()}, nil)
		return false
	}
	defer handover.CloseFiles(files)
	offer := handover.Msg{Op: handover.OpOffer, UDP: len(l.UDP), TCP: len(l.TCP), Pod: a.pod.uid}
	for _, ad := range l.Addrs() {
		offer.Addrs = append(offer.Addrs, ad.String())
	}
	if err := handover.WriteFrame(conn, offer, files); err != nil {
		a.log.Warn("sending listeners to the successor", logkey.Err, err)
		return false
	}
	n, err := a.sendCache(conn)
	if err != nil {
		a.log.Warn("sending the cache to the successor", logkey.Err, err)
		return false
	}
	var ready handover.Msg
	if _, err := handover.ReadFrame(conn, &ready); err != nil || ready.Op != handover.OpReady {
		a.log.Warn("successor did not start serving; keeping the sockets", logkey.Err, err)
		return false
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.server.StopReading(sctx); err != nil {
		a.log.Warn("finishing in-flight queries before handover", logkey.Err, err)
	}
	// The successor owns the handover socket from now on: stop accepting
	// before saying done, so it never finds a listener of ours there.
	_ = ln.Close()
	succ := hello.Pod
	a.successorPod.Store(&succ)
	_ = handover.WriteFrame(conn, handover.Msg{Op: handover.OpDone}, nil)
	a.m.handovers.WithLabelValues("sent").Inc()
	a.log.Info("handed over to a successor", "cache_entries", n)
	return true
}

// sendCache streams the warm cache to w, never holding it whole: the
// streamedCache marker, then cache.Export's dump, cut short (but whole) at
// the export deadline. It returns the number of entries sent.
func (a *Agent) sendCache(w io.Writer) (int, error) {
	if err := handover.WriteCacheHeader(w); err != nil {
		return 0, err
	}
	// Export stops between records at its deadline. Hidden behind a plain
	// io.Writer, the connection keeps the handover's own deadline, so that
	// the cut never falls inside a record.
	n, err := a.cache.Export(struct{ io.Writer }{w}, min(int64(a.cfg.CacheSize), 256<<20), time.Now().Add(2*time.Second))
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) { // past the deadline the dump is short but whole
		return n, err
	}
	return n, nil
}
