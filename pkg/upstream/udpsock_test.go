package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// portLog records the source port of every query a test server sees.
type portLog struct {
	mu    sync.Mutex // guards following
	ports []int
}

func (l *portLog) record(w dns.ResponseWriter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ports = append(l.ports, w.RemoteAddr().(*net.UDPAddr).Port)
}

func (l *portLog) get() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.ports...)
}

// startPortServer answers every query with 192.0.2.1 and logs its port.
func startPortServer(tb testing.TB) (*testServer, *portLog) {
	tb.Helper()
	log := &portLog{}
	ts := startServer(tb, func(w dns.ResponseWriter, r *dns.Msg) {
		log.record(w)
		answerA("192.0.2.1")(w, r)
	})
	return ts, log
}

// pooledUDP returns the socket the next query to s would take, leaving it
// in the pool.
func pooledUDP(tb testing.TB, s *server) *udpSock {
	tb.Helper()
	s.udp.mu.Lock()
	defer s.udp.mu.Unlock()
	if len(s.udp.idle) == 0 {
		tb.Fatalf("udp pool of %v: got no idle socket, want one", s.addr)
	}
	return s.udp.idle[len(s.udp.idle)-1].conn
}

func localPort(u *udpSock) int { return u.conn.LocalAddr().(*net.UDPAddr).Port }

func checkClosed(tb testing.TB, u *udpSock) {
	tb.Helper()
	if _, err := u.conn.Write([]byte{0}); !errors.Is(err, net.ErrClosed) {
		tb.Errorf("write on a discarded socket: got %v, want net.ErrClosed", err)
	}
}

func checkUDPIdle(tb testing.TB, s *server, want int) {
	tb.Helper()
	if got := s.udp.size(); got != want {
		tb.Errorf("idle udp sockets of %v: got %d, want %d", s.addr, got, want)
	}
}

// waitDatagram waits until a datagram is queued on u, asking the kernel
// (SIOCINQ) rather than quiet, which is under test; the bound only
// guards against a hang.
func waitDatagram(tb testing.TB, u *udpSock) {
	tb.Helper()
	raw, err := u.conn.SyscallConn()
	if err != nil {
		tb.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		n, ioctlErr := 0, error(nil)
		if err := raw.Control(func(fd uintptr) { n, ioctlErr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil || ioctlErr != nil {
			tb.Fatalf("SIOCINQ: %v, %v", err, ioctlErr)
		}
		if n > 0 {
			return
		}
		if time.Now().After(end) {
			tb.Fatalf("no datagram queued on the socket")
		}
	}
}

func TestUDPSocketReusedUpToUseBound(t *testing.T) {
	ts, log := startPortServer(t)
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})
	s := f.all[0]

	for i := 0; i < udpMaxUses-1; i++ {
		exchangeA(t, f, fmt.Sprintf("q%d.example.", i))
	}
	first := pooledUDP(t, s)
	// Its last query: afterwards the socket is closed, not pooled.
	exchangeA(t, f, "last.example.")
	checkClosed(t, first)
	checkUDPIdle(t, s, 0)
	ports := log.get()
	for i, p := range ports {
		if p != localPort(first) {
			t.Fatalf("query %d: got source port %d, want %d of the one reused socket", i, p, localPort(first))
		}
	}

	exchangeA(t, f, "next.example.")
	second := pooledUDP(t, s)
	if got, want := log.get()[udpMaxUses], localPort(second); got != want {
		t.Errorf("source port after the use bound: got %d, want %d of the new socket", got, want)
	}
	checkUDPIdle(t, s, 1)
}

func TestUDPSocketExpiresByAge(t *testing.T) {
	ts, _ := startPortServer(t)
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})
	s := f.all[0]
	exchangeA(t, f, "www.example.")
	old := pooledUDP(t, s)

	u, err := s.udpSocket(time.Now().Add(udpMaxAge), time.Time{})
	if err != nil {
		t.Fatalf("udpSocket: %v", err)
	}
	defer u.Close()
	if u == old {
		t.Errorf("udpSocket after udpMaxAge: got the old socket, want a new one")
	}
	checkClosed(t, old)
	checkUDPIdle(t, s, 0)
}

// A deadline left by the last owner, even one long past, does not stop
// the socket from serving the next query.
func TestUDPSocketPastDeadlineReplacedWhenTaken(t *testing.T) {
	ts, _ := startPortServer(t)
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})
	s := f.all[0]
	u, err := s.udpSocket(time.Now(), time.Time{})
	if err != nil {
		t.Fatalf("udpSocket: %v", err)
	}
	if err := u.conn.SetDeadline(aLongTimeAgo); err != nil {
		t.Fatal(err)
	}
	s.releaseUDP(u, true)
	if got, err := s.udpSocket(time.Now(), time.Time{}); err != nil || got != u {
		t.Fatalf("udpSocket: got %p, %v; want the pooled socket %p", got, err, u)
	}
	s.releaseUDP(u, true)
	exchangeA(t, f, "www.example.")
	if got := pooledUDP(t, s); got != u {
		t.Errorf("after a query: got socket %p in the pool, want %p", got, u)
	}
}

// A query that timed out leaves its socket closed: the reply that comes
// late goes nowhere, and the next query is not confused by it.
func TestTimedOutUDPSocketNotReused(t *testing.T) {
	release, lateSent := make(chan struct{}), make(chan struct{})
	var once sync.Once
	log := &portLog{}
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		log.record(w)
		if r.Question[0].Name == "slow.example." {
			<-release
			_ = w.WriteMsg(replyA(r, "203.0.113.66"))
			close(lateSent)
			return
		}
		answerA("192.0.2.1")(w, r)
	})
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	cfg := testConfig(ts)
	cfg.TryTimeout, cfg.Deadline = 50*time.Millisecond, 50*time.Millisecond
	f, _ := newTestForwarder(t, cfg, hooks{})
	s := f.all[0]

	exchangeA(t, f, "www.example.")
	first := pooledUDP(t, s)
	_, _, err := exchange(context.Background(), f, query("slow.example.", dns.TypeA))
	if !errors.Is(err, ErrNoAnswer) || attemptKind(err) != kindTimeout {
		t.Fatalf("slow query: got %v, want ErrNoAnswer after a timeout", err)
	}
	if ports := log.get(); ports[1] != ports[0] {
		t.Errorf("slow query: got port %d, want %d (the pooled socket)", ports[1], ports[0])
	}
	checkUDPIdle(t, s, 0)
	checkClosed(t, first)

	once.Do(func() { close(release) })
	<-lateSent
	if got, _ := exchangeA(t, f, "www.example."); got != "192.0.2.1" {
		t.Errorf("query after the late reply: got %s, want 192.0.2.1", got)
	}
	if got := counterValue(t, f, "errors", ts.addr.String(), kindSpoofed); got != 0 {
		t.Errorf("spoofed errors: got %v, want 0 (nothing read but the reply)", got)
	}
	if got := pooledUDP(t, s); got == first {
		t.Errorf("pooled socket: got the timed-out one, want a new one")
	}
}

// A datagram that arrives on an idle socket (here a duplicate reply) gets
// the socket closed before the next query could read it.
func TestQueuedDatagramDiscardsPooledSocket(t *testing.T) {
	dupSent := make(chan struct{}, 1)
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		_ = w.WriteMsg(replyA(r, "192.0.2.1"))
		if r.Question[0].Name == "dup.example." {
			_ = w.WriteMsg(replyA(r, "203.0.113.66"))
			dupSent <- struct{}{}
		}
	})
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})
	s := f.all[0]

	exchangeA(t, f, "dup.example.")
	<-dupSent
	first := pooledUDP(t, s)
	waitDatagram(t, first)
	if got, _ := exchangeA(t, f, "www.example."); got != "192.0.2.1" {
		t.Errorf("answer: got %s, want 192.0.2.1", got)
	}
	if got := counterValue(t, f, "errors", ts.addr.String(), kindSpoofed); got != 0 {
		t.Errorf("spoofed errors: got %v, want 0 (the duplicate is never read)", got)
	}
	checkClosed(t, first)
	if got := pooledUDP(t, s); got == first {
		t.Errorf("pooled socket: got the one with a datagram queued, want a new one")
	}
}

func TestQuietSeesDatagramsAndErrors(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	u, err := dialUDP(pc.LocalAddr().(*net.UDPAddr), time.Now())
	if err != nil {
		t.Fatalf("dialUDP: %v", err)
	}
	t.Cleanup(func() { _ = u.Close() })

	if !u.quiet() {
		t.Fatalf("quiet on a new socket: got false, want true")
	}
	if _, err := pc.WriteTo([]byte("late"), u.conn.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	waitDatagram(t, u)
	if u.quiet() {
		t.Errorf("quiet with a datagram queued: got true, want false (peeking must not consume it)")
	}
	buf := make([]byte, 16)
	if n, err := u.conn.Read(buf); err != nil || string(buf[:n]) != "late" {
		t.Fatalf("read: got %q, %v; want the queued datagram", buf[:n], err)
	}
	if !u.quiet() {
		t.Errorf("quiet once the datagram is read: got false, want true")
	}

	// An ICMP port unreachable leaves an error pending on the socket; on
	// loopback it comes at once, the bound only guards against a hang.
	_ = pc.Close()
	if _, err := u.conn.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); u.quiet(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("quiet with an ICMP error pending: got true, want false")
		}
	}
}

func TestFailedUDPAttemptsDiscardTheirSocket(t *testing.T) {
	tests := []struct {
		name string
		h    dns.HandlerFunc
	}{
		{"truncated", truncateUDP("192.0.2.7")},
		{"spoofed first", func(w dns.ResponseWriter, r *dns.Msg) {
			m := replyA(r, "203.0.113.66")
			m.Id = r.Id + 1
			_ = w.WriteMsg(m)
			_ = w.WriteMsg(replyA(r, "192.0.2.1"))
		}},
		{"malformed first", func(w dns.ResponseWriter, r *dns.Msg) {
			_, _ = w.Write([]byte{byte(r.Id >> 8), byte(r.Id), 0x80})
			_ = w.WriteMsg(replyA(r, "192.0.2.1"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, tt.h)
			f, _ := newTestForwarder(t, testConfig(ts), hooks{})
			for i := 0; i < 2; i++ {
				exchangeA(t, f, "www.example.")
				checkUDPIdle(t, f.all[0], 0)
			}
			if got := ts.udpQueries.Load(); got != 2 {
				t.Errorf("udp queries: got %d, want 2", got)
			}
		})
	}
}

func TestConnRefusedDiscardsSocketAndFailsOver(t *testing.T) {
	pc, ln := listenPair(t)
	dead := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	_, _ = pc.Close(), ln.Close()
	alive := startServer(t, answerA("192.0.2.2"))
	cfg := testConfig(alive)
	cfg.Servers = append(cfg.Servers[:0], dead, alive.addr)
	cfg.FailThreshold = 100 // keep the dead server first in order
	f, _ := newTestForwarder(t, cfg, hooks{})

	for i := 0; i < 3; i++ {
		if got, from := exchangeA(t, f, "www.example."); got != "192.0.2.2" || from != alive.addr {
			t.Fatalf("query %d: got %s from %v, want 192.0.2.2 from %v", i, got, from, alive.addr)
		}
		checkUDPIdle(t, f.all[0], 0)
	}
	if got := counterValue(t, f, "errors", dead.String(), kindConnRefused); got != 3 {
		t.Errorf("conn_refused errors: got %v, want 3", got)
	}
	checkUDPIdle(t, f.all[1], 1)
}

func TestCloseClosesPooledUDPSockets(t *testing.T) {
	ts, _ := startPortServer(t)
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})
	exchangeA(t, f, "www.example.")
	s := f.all[0]
	u := pooledUDP(t, s)
	if err := f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	checkClosed(t, u)
	checkUDPIdle(t, s, 0)

	// A socket whose query ends after Close is closed, not pooled.
	late, err := dialUDP(s.udpAddr, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s.releaseUDP(late, true)
	checkClosed(t, late)
	checkUDPIdle(t, s, 0)
}

// Concurrent queries each own their socket: every one gets the answer to
// its own question.
func TestConcurrentExchangesGetTheirOwnReplies(t *testing.T) {
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		var n int
		if _, err := fmt.Sscanf(r.Question[0].Name, "q%d.example.", &n); err != nil {
			return
		}
		_ = w.WriteMsg(replyA(r, fmt.Sprintf("192.0.2.%d", n)))
	})
	cfg := testConfig(ts)
	cfg.udpMaxUses = 1000 // no socket retires on its use bound: all stay pooled
	f, _ := newTestForwarder(t, cfg, hooks{})
	const workers, each = 8, 40
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				n := (w*each+i)%250 + 1
				resp, _, err := exchange(context.Background(), f, query(fmt.Sprintf("q%d.example.", n), dns.TypeA))
				if err != nil {
					t.Errorf("query %d: %v", n, err)
					return
				}
				if got, want := resp.Answer[0].(*dns.A).A.String(), fmt.Sprintf("192.0.2.%d", n); got != want {
					t.Errorf("query %d: got %s, want %s", n, got, want)
				}
			}
		}()
	}
	wg.Wait()
	if got := f.all[0].udp.size(); got < 1 || got > workers {
		t.Errorf("idle udp sockets: got %d, want 1 to %d", got, workers)
	}
}
