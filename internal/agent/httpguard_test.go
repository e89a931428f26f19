package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// floodConns is how many idle keep-alive connections the flood opens.
const floodConns = 10000

// TestHTTPIdleConnectionFlood opens 10,000 keep-alive connections to the
// health listener from 40 client IPs, each sending one request and then
// staying idle, and holds them open. The agent keeps at most its cap,
// closes the rest, its heap grows by a bounded amount, and a fresh client
// (the kubelet) is answered meanwhile.
func TestHTTPIdleConnectionFlood(t *testing.T) {
	raiseNoFile(t, floodConns+1024)
	up := startUpstream(t)
	cfg := testAgentConfig(t, up.Addr, t.TempDir(), freePort(t))
	ta := startAgent(t, cfg)
	heapBefore := heapInUse()

	var held []net.Conn
	var mu sync.Mutex
	var closed atomic.Int64
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range floodConns {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			src := &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(1+i%40))}
			c, err := (&net.Dialer{LocalAddr: src, Timeout: 5 * time.Second}).Dial("tcp", cfg.HealthAddr)
			if err != nil {
				closed.Add(1)
				return
			}
			if keepAlive(c) != nil {
				closed.Add(1)
				_ = c.Close()
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range held {
			_ = c.Close()
		}
	})
	heapAfter := heapInUse()
	open := stillOpen(held)
	closed.Add(int64(len(held) - open))
	guardOpen := ta.agent().httpGuardOpen()
	t.Logf("flood of %d: %d still open, %d closed or refused by the agent; agent holds %d; heap in use %d -> %d MiB",
		floodConns, open, closed.Load(), guardOpen, heapBefore>>20, heapAfter>>20)

	// The kubelet's probe, from an address of its own, while the flood holds on.
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + cfg.HealthAddr + "/readyz")
	if err != nil {
		t.Fatalf("fresh request during the flood: got %v, want an answer", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("fresh request during the flood: got %s, want 200", resp.Status)
	}
	if open > httpMaxConns || guardOpen > httpMaxConns {
		t.Errorf("flood connections open: got %d by the clients' count and %d by the agent's, want at most %d", open, guardOpen, httpMaxConns)
	}
	if guardOpen > httpMaxConns {
		t.Errorf("connections the agent holds: got %d, want at most %d", guardOpen, httpMaxConns)
	}
	if got := closed.Load(); got < floodConns-httpMaxConns {
		t.Errorf("flood connections closed or refused: got %d, want at least %d", got, floodConns-httpMaxConns)
	}
	if refused := testutil.ToFloat64(ta.agent().m.httpRefused); refused == 0 {
		t.Error("nodecache_http_connections_refused_total: got 0, want the refusals counted")
	}
	// Heap in use includes this test's own client side. What the agent would
	// hold without the caps: a reader, a writer and a goroutine per
	// connection, some 10 KiB each, 100 MiB for the flood.
	if grew := int64(heapAfter) - int64(heapBefore); grew > 48<<20 {
		t.Errorf("heap in use grew by %d MiB during the flood, want under 48 MiB", grew>>20)
	}
}

// keepAlive sends one keep-alive request on c and reads the reply, leaving
// c open and idle; it fails when the agent closed c instead.
func keepAlive(c net.Conn) error {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	defer c.SetDeadline(time.Time{}) //nolint:errcheck // best effort
	if _, err := io.WriteString(c, "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 512), nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.Close {
		return fmt.Errorf("reply closes the connection")
	}
	return err
}

// stillOpen counts the connections the agent has not closed: a read that
// times out instead of ending.
func stillOpen(conns []net.Conn) int {
	var n atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for _, c := range conns {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			var b [1]byte
			_, err := c.Read(b[:])
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(n.Load())
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// raiseNoFile lifts the soft descriptor limit to n (or the hard limit).
func raiseNoFile(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	old := lim
	lim.Cur = min(max(lim.Cur, n), lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
	if lim.Cur < n {
		t.Logf("descriptor limit %d is below %d: connections past it fail to dial and count as refused", lim.Cur, n)
	}
}
