//go:build linux

package server

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// sysSeam stands between the batch loop and the kernel: it makes the real
// system calls, counts them, and on request fails recvmmsg with EPERM,
// holds a recvmmsg until the test lets it go, or lets sendmmsg send at most
// sendMax messages per call (a partial send, as the kernel may make).
type sysSeam struct {
	sendMax uintptr // set before the server starts

	failRecv   atomic.Int64 // the next this many recvmmsg calls fail with EPERM
	gate       atomic.Pointer[chan struct{}]
	gated      atomic.Int64 // recvmmsg calls that waited at a gate
	recvCalls  atomic.Int64
	recvEAGAIN atomic.Int64
	sendCalls  atomic.Int64
	sendMaxVec atomic.Int64 // the most messages one sendmmsg was asked to send

	mu     sync.Mutex // guards sleeps
	sleeps []time.Duration
}

// installSeam puts a sysSeam in place until the test ends. Called before
// the server starts, its cleanup runs after the server's.
func installSeam(t *testing.T) *sysSeam {
	m := &sysSeam{}
	oldSys, oldSleep := batchSyscall, batchSleep
	batchSyscall, batchSleep = m.syscall, m.sleep
	t.Cleanup(func() { batchSyscall, batchSleep = oldSys, oldSleep })
	return m
}

func (m *sysSeam) syscall(trap, a1, a2, a3, a4, a5, a6 uintptr) (uintptr, uintptr, syscall.Errno) {
	switch trap {
	case unix.SYS_RECVMMSG:
		if g := m.gate.Load(); g != nil {
			m.gated.Add(1)
			<-*g
		}
		m.recvCalls.Add(1)
		if m.failRecv.Load() > 0 {
			m.failRecv.Add(-1)
			return 0, 0, unix.EPERM
		}
		r1, r2, e := unix.RawSyscall6(trap, a1, a2, a3, a4, a5, a6)
		if e == unix.EAGAIN {
			m.recvEAGAIN.Add(1)
		}
		return r1, r2, e
	case unix.SYS_SENDMMSG:
		m.sendCalls.Add(1)
		if int64(a3) > m.sendMaxVec.Load() {
			m.sendMaxVec.Store(int64(a3))
		}
		if m.sendMax > 0 && a3 > m.sendMax {
			a3 = m.sendMax
		}
	}
	return unix.RawSyscall6(trap, a1, a2, a3, a4, a5, a6)
}

func (m *sysSeam) sleep(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sleeps = append(m.sleeps, d)
}

func (m *sysSeam) slept() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.sleeps)
}

// TestBatchedPartialSend: when sendmmsg sends only part of a batch (here
// one message per call), flush sends the rest. The loop is held in its
// recvmmsg until a whole burst is queued, so that it reads, answers and
// flushes the burst as one batch.
func TestBatchedPartialSend(t *testing.T) {
	seam := installSeam(t)
	seam.sendMax = 1
	_, addr := startServerOn(t, netip.MustParseAddr("127.0.0.1"), 1, Config{}, Deps{Resolver: &fakeResolver{}})
	exchange(t, addr.String(), name(0), dns.TypeA) // a miss: cached
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	gate := make(chan struct{})
	seam.gate.Store(&gate)
	const burst = 10
	for id := 1; id <= burst; id++ {
		m := new(dns.Msg)
		m.SetQuestion(name(0), dns.TypeA)
		m.Id = uint16(id)
		if _, err := c.Write(mustPack(t, m)); err != nil {
			t.Fatal(err)
		}
	}
	close(gate)
	seam.gate.Store(nil)
	got := map[uint16]bool{}
	buf := make([]byte, 2048)
	for len(got) < burst {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("%d of %d replies (got ids %v): %v", len(got), burst, got, err)
		}
		var r dns.Msg
		if err := r.Unpack(buf[:n]); err != nil || len(r.Answer) != 1 {
			t.Fatalf("reply %v: %v", r, err)
		}
		got[r.Id] = true
	}
	if v := seam.sendMaxVec.Load(); v < 2 {
		t.Fatalf("no sendmmsg of more than one reply (at most %d): no partial send was made", v)
	}
}

// TestBatchedLateReply: a miss whose answer is ready while the read loop
// is busy (here held in its recvmmsg) is not sent alone: it goes out with
// the loop's next sendmmsg, beside the reply the loop answers inline.
func TestBatchedLateReply(t *testing.T) {
	seam := installSeam(t)
	f := &fakeResolver{block: make(chan struct{})}
	s, addr := startServerOn(t, netip.MustParseAddr("127.0.0.1"), 1, Config{}, Deps{Resolver: f})
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(id uint16, class uint16) {
		m := new(dns.Msg)
		m.SetQuestion(name(1), dns.TypeA)
		m.Id, m.Question[0].Qclass = id, class
		if _, err := c.Write(mustPack(t, m)); err != nil {
			t.Fatal(err)
		}
	}
	send(1, dns.ClassINET) // a miss: its worker waits in Resolve
	waitFor(t, "the miss to reach the resolver", func() bool { return f.calls.Load() == 1 })
	gate := make(chan struct{})
	var open sync.Once
	release := func() { open.Do(func() { close(gate); seam.gate.Store(nil) }) }
	defer release() // a failure below must not leave the loop held: the server's cleanup waits for it
	seam.gate.Store(&gate)
	send(2, dns.ClassCHAOS) // answered inline (REFUSED); wakes the loop, held at the gate
	waitFor(t, "the loop to wait at the gate", func() bool { return seam.gated.Load() == 1 })
	done := make(chan struct{})
	go func() { s.queries.Wait(); close(done) }() // the miss's worker has handed its reply on
	close(f.block)
	<-done
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var peekErr error
	_ = raw.Read(func(fd uintptr) bool {
		_, _, peekErr = syscall.Recvfrom(int(fd), make([]byte, 1), syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	})
	if peekErr != syscall.EAGAIN {
		t.Fatalf("the miss's reply with the loop busy: already sent (peek: %v), want it queued for the loop", peekErr)
	}
	sends := seam.sendCalls.Load()
	release()
	got := map[uint16]int{}
	buf := make([]byte, 2048)
	for len(got) < 2 {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("replies %v: %v", got, err)
		}
		var r dns.Msg
		if err := r.Unpack(buf[:n]); err != nil {
			t.Fatal(err)
		}
		got[r.Id] = r.Rcode
	}
	if got[1] != dns.RcodeSuccess || got[2] != dns.RcodeRefused {
		t.Errorf("rcodes by id: got %v, want 1: NOERROR, 2: REFUSED", got)
	}
	if n, most := seam.sendCalls.Load()-sends, seam.sendMaxVec.Load(); n != 1 || most != 2 {
		t.Errorf("after the loop went on: %d sendmmsg calls, at most %d replies in one; want one with both", n, most)
	}
}

// TestBatchedMissReply: a miss's reply goes out with sendmmsg, whether the
// read loop is still running when it is ready (the loop sends it) or has
// parked (its worker flushes the late replies): one call, no sendto.
func TestBatchedMissReply(t *testing.T) {
	seam := installSeam(t)
	_, addr := startServerOn(t, netip.MustParseAddr("127.0.0.1"), 1, Config{}, Deps{Resolver: &fakeResolver{}})
	for i := range 3 {
		before := seam.sendCalls.Load()
		if r := exchange(t, addr.String(), name(2+i), dns.TypeA); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("miss %d: got %v, want one A record", i, r)
		}
		if n := seam.sendCalls.Load() - before; n != 1 {
			t.Errorf("miss %d: %d sendmmsg calls, want 1", i, n)
		}
	}
}

// TestBatchedManyMissReplies: more misses than a sendmmsg holds, answered
// at once while the read loop waits, all get their reply: the flusher
// sends batch after batch until nothing is queued.
func TestBatchedManyMissReplies(t *testing.T) {
	installSeam(t)
	f := &fakeResolver{block: make(chan struct{})}
	_, addr := startServerOn(t, netip.MustParseAddr("127.0.0.1"), 1, Config{}, Deps{Resolver: f})
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 2*batchSize + 5 // under the 100 in flight a client may have
	for id := 1; id <= n; id++ {
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("m%d.burst.example.", id), dns.TypeA)
		m.Id = uint16(id)
		if _, err := c.Write(mustPack(t, m)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every miss to reach the resolver", func() bool { return f.calls.Load() == n })
	close(f.block)
	got := map[uint16]bool{}
	buf := make([]byte, 2048)
	for len(got) < n {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		k, err := c.Read(buf)
		if err != nil {
			t.Fatalf("%d of %d replies: %v", len(got), n, err)
		}
		var r dns.Msg
		if err := r.Unpack(buf[:k]); err != nil || len(r.Answer) != 1 {
			t.Fatalf("reply %v: %v", r, err)
		}
		got[r.Id] = true
	}
}

// TestBatchedReadBackoff: a read that fails (EPERM, as from a seccomp
// filter) is waited out, 1 ms doubling, the count starting over after a
// read that succeeds, and logged once; a socket with nothing to read
// (EAGAIN) is no failure: the loop waits in the netpoller, one recvmmsg
// per wake, neither backing off nor calling again.
func TestBatchedReadBackoff(t *testing.T) {
	seam := installSeam(t)
	seam.failRecv.Store(3)
	var logs lockedBuffer
	_, addr := startServerLog(t, netip.MustParseAddr("127.0.0.1"), 1, Config{}, Deps{Resolver: &fakeResolver{}},
		slog.New(slog.NewTextHandler(&logs, nil)))
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 2048)
	const rounds = 8
	for i := 1; i <= rounds; i++ {
		// The loop has found the socket empty: it waits for this query.
		waitFor(t, "recvmmsg to find the socket empty", func() bool { return seam.recvEAGAIN.Load() >= int64(i) })
		if i == 2 {
			seam.failRecv.Store(2) // the next two reads fail
		}
		m := new(dns.Msg)
		m.SetQuestion(name(0), dns.TypeA)
		m.Id = uint16(i)
		if _, err := c.Write(mustPack(t, m)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(buf); err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
	}
	ms := time.Millisecond
	if got, want := seam.slept(), []time.Duration{ms, 2 * ms, 4 * ms, ms, 2 * ms}; !slices.Equal(got, want) {
		t.Errorf("waits after failed reads: got %v, want %v", got, want)
	}
	// 5 failed calls; per round, the one that reads the query and the one
	// that finds the socket empty again; and the first empty one.
	if got, want := seam.recvCalls.Load(), int64(5+1+2*rounds); got != want {
		t.Errorf("recvmmsg calls: got %d, want %d", got, want)
	}
	if n := strings.Count(logs.String(), "reading from udp socket"); n != 1 {
		t.Errorf("read errors logged %d times, want once:\n%s", n, logs.String())
	}
}
