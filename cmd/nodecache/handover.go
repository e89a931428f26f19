package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodecache/nodecache/pkg/server"
)

// The handover protocol, over the unix socket --handover-socket:
//
//	successor   → predecessor  hello{version}
//	predecessor → successor    offer{addrs, udp, tcp} + SCM_RIGHTS(listener fds)
//	predecessor → successor    the warm cache: 0xFFFFFFFF, then cache.Export's stream
//	successor   → predecessor  ready       (it now reads the shared sockets)
//	predecessor → successor    done        (it stopped reading; in-flight finished)
//
// Both processes read the shared sockets between offer and done, so no
// queued query is lost; the predecessor then exits without teardown.

const handoverVersion = 1

type handoverMsg struct {
	Op      string   `json:"op"`
	Version int      `json:"version,omitempty"`
	Addrs   []string `json:"addrs,omitempty"`
	UDP     int      `json:"udp,omitempty"`
	TCP     int      `json:"tcp,omitempty"`
	Error   string   `json:"error,omitempty"`
	// Pod is the sender's pod UID (--pod-uid), empty outside a pod.
	Pod string `json:"pod,omitempty"`
}

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
func (a *agent) acquireListeners(ctx context.Context) (*server.Listeners, func(), error) {
	l, conn, err := a.receiveHandover(ctx)
	if err != nil {
		a.log.Warn("no handover from the predecessor; opening new sockets", "err", err)
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
func (a *agent) receiveHandover(ctx context.Context) (*server.Listeners, *net.UnixConn, error) {
	if a.cfg.HandoverSocket == "" {
		return nil, nil, nil
	}
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "unix", a.cfg.HandoverSocket)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("dialing predecessor: %w", err)
	}
	conn := c.(*net.UnixConn)
	_ = conn.SetDeadline(time.Now().Add(a.cfg.HandoverWait))
	fail := func(err error) (*server.Listeners, *net.UnixConn, error) {
		_ = conn.Close()
		return nil, nil, err
	}
	if err := writeFrame(conn, handoverMsg{Op: "hello", Version: handoverVersion, Pod: a.pod.uid}, nil); err != nil {
		return fail(fmt.Errorf("greeting predecessor: %w", err))
	}
	var offer handoverMsg
	files, err := readFrame(conn, &offer)
	if err != nil {
		return fail(fmt.Errorf("reading predecessor's offer: %w", err))
	}
	if offer.Op != "offer" || len(files) != offer.UDP+offer.TCP {
		closeFiles(files)
		return fail(fmt.Errorf("predecessor's offer is %q with %d descriptors (%s)", offer.Op, len(files), offer.Error))
	}
	want := make([]string, len(a.addrs))
	for i, ad := range a.addrs {
		want[i] = ad.String()
	}
	if !slices.Equal(slices.Sorted(slices.Values(offer.Addrs)), slices.Sorted(slices.Values(want))) {
		closeFiles(files)
		return fail(fmt.Errorf("predecessor serves %v, this agent %v", offer.Addrs, want))
	}
	l, err := server.FromFiles(files)
	if err != nil {
		return fail(err)
	}
	if err := a.pod.recordPredecessor(offer.Pod); err != nil {
		a.log.Warn("recording the predecessor's pod", "err", err)
	}
	// The warm cache follows; a failure here costs hit rate, not the handover.
	r := bufio.NewReader(conn)
	var size uint32
	if err := binary.Read(r, binary.BigEndian, &size); err == nil && size > 0 {
		var dump io.Reader = r // streamed: it ends at its own end marker
		if size != streamedCache {
			dump = io.LimitReader(r, int64(size)) // a predecessor that sends the length first
		}
		n, err := a.cache.Import(dump, time.Now().Add(a.cfg.HandoverWait))
		if err != nil {
			a.log.Warn("importing the predecessor's cache", "err", err, "imported", n)
		} else {
			a.log.Info("imported the predecessor's cache", "entries", n, "bytes", size)
		}
	}
	return l, conn, nil
}

// finishHandover tells the predecessor we serve, waits for it to stop, and
// takes the handover socket over for our own successor.
func (a *agent) finishHandover(conn *net.UnixConn) {
	defer conn.Close()
	start := time.Now()
	_ = conn.SetDeadline(time.Now().Add(a.cfg.HandoverWait + 10*time.Second))
	if err := writeFrame(conn, handoverMsg{Op: "ready"}, nil); err != nil {
		a.log.Warn("telling predecessor we serve", "err", err)
		return
	}
	var done handoverMsg
	if _, err := readFrame(conn, &done); err != nil || done.Op != "done" {
		a.log.Warn("predecessor did not confirm the handover", "err", err, "op", done.Op)
		return
	}
	a.log.Info("took over from the predecessor", "wait", time.Since(start).Round(time.Millisecond))
}

// serveHandover waits for a successor and hands it the sockets and the warm
// cache; then it stops this agent without teardown.
func (a *agent) serveHandover(ctx context.Context) error {
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
			return errHandedOver
		}
	}
}

// socketWait is how long a new agent waits for its predecessor to release
// the admin and handover socket paths: the predecessor exits once it has
// handed over, within the bound finishHandover gives it.
func (a *agent) socketWait() time.Duration { return a.cfg.HandoverWait + 10*time.Second }

// errHandedOver ends the agent's errgroup after a successful handover.
var errHandedOver = errors.New("handed over to a successor")

func (a *agent) handOver(ctx context.Context, conn *net.UnixConn, ln *net.UnixListener) bool {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var hello handoverMsg
	_, err := readFrame(conn, &hello)
	if errors.Is(err, io.EOF) { // a probe whether we listen (listenRootSocket), not a successor
		return false
	}
	if err != nil || hello.Op != "hello" || hello.Version != handoverVersion {
		a.log.Warn("refusing a successor's handover", "op", hello.Op, "version", hello.Version, "err", err)
		return false
	}
	if hello.Pod != "" && hello.Pod == a.pod.predecessor() {
		// A restarted container of the pod this agent replaced: the
		// sockets never go back to an older revision.
		a.log.Warn("refusing a handover to the pod this agent took over from", "pod", hello.Pod)
		_ = writeFrame(conn, handoverMsg{Op: "error", Error: "this pod was superseded by pod " + a.pod.uid}, nil)
		return false
	}
	a.successorSeen.Store(true)
	l := a.server.Listeners()
	files, err := l.Files()
	if err != nil {
		_ = writeFrame(conn, handoverMsg{Op: "error", Error: err.Error()}, nil)
		return false
	}
	defer closeFiles(files)
	offer := handoverMsg{Op: "offer", UDP: len(l.UDP), TCP: len(l.TCP), Pod: a.pod.uid}
	for _, ad := range l.Addrs() {
		offer.Addrs = append(offer.Addrs, ad.String())
	}
	if err := writeFrame(conn, offer, files); err != nil {
		a.log.Warn("sending listeners to the successor", "err", err)
		return false
	}
	n, err := a.sendCache(conn)
	if err != nil {
		a.log.Warn("sending the cache to the successor", "err", err)
		return false
	}
	var ready handoverMsg
	if _, err := readFrame(conn, &ready); err != nil || ready.Op != "ready" {
		a.log.Warn("successor did not start serving; keeping the sockets", "err", err)
		return false
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.server.StopReading(sctx); err != nil {
		a.log.Warn("finishing in-flight queries before handover", "err", err)
	}
	// The successor owns the handover socket from now on: stop accepting
	// before saying done, so it never finds a listener of ours there.
	_ = ln.Close()
	succ := hello.Pod
	a.successorPod.Store(&succ)
	_ = writeFrame(conn, handoverMsg{Op: "done"}, nil)
	a.m.handovers.WithLabelValues("sent").Inc()
	a.log.Info("handed over to a successor", "cache_entries", n)
	return true
}

// streamedCache in place of the cache dump's length says that the dump is
// streamed and ends at its own end marker (cache.Export). A successor of an
// earlier version reads it as a length of 4 GiB and still stops at the end
// marker, so the handover version stays the same.
const streamedCache = math.MaxUint32

// sendCache streams the warm cache to w, never holding it whole: the
// streamedCache marker, then cache.Export's dump, cut short (but whole) at
// the export deadline. It returns the number of entries sent.
func (a *agent) sendCache(w io.Writer) (int, error) {
	if err := binary.Write(w, binary.BigEndian, uint32(streamedCache)); err != nil {
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

// writeFrame sends a length-prefixed JSON message, with files as SCM_RIGHTS.
func writeFrame(c *net.UnixConn, m handoverMsg, files []*os.File) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	buf := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	buf = append(buf, body...)
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	_, _, err = c.WriteMsgUnix(buf, oob, nil)
	return err
}

// readFrame reads one frame written by writeFrame, and any descriptors.
func readFrame(c *net.UnixConn, m *handoverMsg) ([]*os.File, error) {
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(256*4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf[:4], oob)
	if err != nil {
		return nil, err
	}
	files, err := parseRights(oob[:oobn])
	if err != nil {
		return nil, err
	}
	if n < 4 {
		if _, err := io.ReadFull(c, buf[n:4]); err != nil {
			closeFiles(files)
			return nil, err
		}
	}
	size := binary.BigEndian.Uint32(buf)
	if size > uint32(len(buf)) {
		closeFiles(files)
		return nil, fmt.Errorf("handover frame of %d bytes is too large", size)
	}
	if _, err := io.ReadFull(c, buf[:size]); err != nil {
		closeFiles(files)
		return nil, err
	}
	if err := json.Unmarshal(buf[:size], m); err != nil {
		closeFiles(files)
		return nil, fmt.Errorf("decoding handover frame: %w", err)
	}
	return files, nil
}

func parseRights(oob []byte) ([]*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("parsing control message: %w", err)
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), fmt.Sprintf("handover-fd-%d", fd)))
		}
	}
	return files, nil
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}
