package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/wire"
)

// blockingResolver blocks misses for names under block. until release is
// closed (by the test, before the server's shutdown), and answers the
// others at once.
type blockingResolver struct {
	fakeResolver
	blocked atomic.Int64 // misses waiting
	release chan struct{}
}

func newBlockingResolver() *blockingResolver {
	return &blockingResolver{release: make(chan struct{})}
}

func (r *blockingResolver) Resolve(ctx context.Context, key wire.Key, by time.Time) (wire.Answer, error) {
	if strings.HasSuffix(key.Name, "\x05block\x00") {
		r.blocked.Add(1)
		defer r.blocked.Add(-1)
		select {
		case <-r.release:
		case <-ctx.Done():
			return wire.Answer{}, ctx.Err()
		}
	}
	return r.fakeResolver.Resolve(ctx, key, by)
}

// waitFor polls cond until it holds, failing the test after a generous
// bound (a hang, not a speed check).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
	}
}

// maxQuery packs a query for name padded (RFC 7830) to exactly size bytes.
func maxQuery(t testing.TB, name string, size int) []byte {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.SetEdns0(1232, false)
	base := m.Len() + 4 // the padding option's code and length
	m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_PADDING{Padding: make([]byte, size-base)}}
	b, err := m.Pack()
	if err != nil || len(b) != size {
		t.Fatalf("packing a %d-byte query: got %d bytes, %v", size, len(b), err)
	}
	return b
}

// dialFrom opens a TCP connection to addr from the loopback IP from.
func dialFrom(t testing.TB, from string, addr netip.AddrPort) *net.TCPConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c.(*net.TCPConn)
}

func writeFramed(t testing.TB, c net.Conn, pkts ...[]byte) {
	t.Helper()
	if _, err := c.Write(framed(pkts)); err != nil {
		t.Fatal(err)
	}
}

// readFramed reads one reply, or returns the error (io.EOF: closed).
func readFramed(c net.Conn) (*dns.Msg, error) {
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint16(hdr[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		return nil, err
	}
	m := new(dns.Msg)
	return m, m.Unpack(b)
}

// TestTCPQueryLengthCap checks that a query of maxTCPQuery bytes is
// answered and that a longer length prefix closes the connection at once,
// before any body arrives.
func TestTCPQueryLengthCap(t *testing.T) {
	_, addr := startServer(t, Config{}, nil, &fakeResolver{})
	c := dialFrom(t, "127.0.0.1", addr)
	writeFramed(t, c, maxQuery(t, "longest.example.", maxTCPQuery))
	if r, err := readFramed(c); err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("query of %d bytes: got %v, %v; want an answer", maxTCPQuery, r, err)
	}
	for _, n := range []int{maxTCPQuery + 1, 65535} {
		c := dialFrom(t, "127.0.0.1", addr)
		if _, err := c.Write(binary.BigEndian.AppendUint16(nil, uint16(n))); err != nil {
			t.Fatal(err)
		}
		if _, err := readFramed(c); !errors.Is(err, io.EOF) {
			t.Errorf("length prefix %d with no body yet: got %v, want the connection closed (EOF)", n, err)
		}
	}
}

// TestTCPFloodBounded has one client open more connections than its share
// and pipeline maximum-length queries for names whose upstream answer never
// comes: the excess connections are closed, the client holds no more
// slow-path slots than its share (the rest of its queries are REFUSED at
// once), and another client's UDP and TCP misses are answered meanwhile.
func TestTCPFloodBounded(t *testing.T) {
	const conns, perClientConns, pipeline, perClientSlots = 15, 10, 16, 20
	r := newBlockingResolver()
	defer close(r.release)
	_, addr := startServer(t, Config{MaxTCPConns: 40, MaxTCPConnsPerClient: perClientConns, TCPPipeline: pipeline,
		MaxInFlight: 30, MaxInFlightPerClient: perClientSlots}, nil, r)

	var cs []*net.TCPConn
	for i := 0; i < conns; i++ {
		cs = append(cs, dialFrom(t, "127.0.0.1", addr))
	}
	var refused, closed, other atomic.Int64
	var wg sync.WaitGroup
	for i, c := range cs {
		var pkts [][]byte
		for j := 0; j < pipeline; j++ {
			pkts = append(pkts, maxQuery(t, fmt.Sprintf("q%d-%d.block.", i, j), maxTCPQuery))
		}
		_, _ = c.Write(framed(pkts)) // a closed connection may refuse the write
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := readFramed(c)
				switch {
				case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err):
					closed.Add(1)
					return
				case err != nil: // the deadline: the rest of this connection's queries are in flight
					return
				case m.Rcode == dns.RcodeRefused:
					refused.Add(1)
				default:
					other.Add(1)
				}
			}
		}()
	}
	wantRefused := int64(perClientConns*pipeline - perClientSlots)
	waitFor(t, "the flood's refusals", func() bool { return refused.Load() >= wantRefused && closed.Load() >= conns-perClientConns })
	if got := r.blocked.Load(); got != perClientSlots {
		t.Errorf("one client's queries waiting upstream: got %d, want its share %d", got, perClientSlots)
	}

	// Another client is answered over UDP and TCP meanwhile, misses included.
	u, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP("127.0.0.2")}, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	m := new(dns.Msg)
	m.SetQuestion("other-udp.example.", dns.TypeA)
	uc := &dns.Conn{Conn: u}
	_ = uc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := uc.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
	if rep, err := uc.ReadMsg(); err != nil || rep.Rcode != dns.RcodeSuccess {
		t.Errorf("another client over UDP: got %v, %v; want an answer", rep, err)
	}
	tc := dialFrom(t, "127.0.0.2", addr)
	writeFramed(t, tc, maxQuery(t, "other-tcp.example.", 100))
	if rep, err := readFramed(tc); err != nil || rep.Rcode != dns.RcodeSuccess {
		t.Errorf("another client over TCP: got %v, %v; want an answer", rep, err)
	}

	for _, c := range cs {
		_ = c.Close()
	}
	wg.Wait()
	if got, want := refused.Load(), wantRefused; got != want {
		t.Errorf("REFUSED: got %d, want %d", got, want)
	}
	if got, want := closed.Load(), int64(conns); got != want {
		t.Errorf("connections closed: got %d, want %d", got, want)
	}
	if other.Load() != 0 {
		t.Errorf("other replies to the flood: got %d, want 0", other.Load())
	}
}

func framed(pkts [][]byte) []byte {
	var buf []byte
	for _, p := range pkts {
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(p)))
		buf = append(buf, p...)
	}
	return buf
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// BenchmarkTCPFlood opens 1,000 TCP connections from 10 client IPs, each
// pipelining 16 maximum-length queries for names whose upstream answer
// never comes, with the default caps, and reports the live heap and the
// goroutine stacks the flood holds once every query is waiting or
// answered REFUSED (client side included, so an upper bound), and how many
// queries wait upstream. Run it with -benchtime 1x.
func BenchmarkTCPFlood(b *testing.B) {
	const clients, connsPer, pipeline = 10, 100, 16
	for b.Loop() {
		r := newBlockingResolver()
		s, addr := startBench(b, r)
		before := liveMem()
		var refused atomic.Int64
		var conns []net.Conn
		for i := 0; i < clients*connsPer; i++ {
			from := fmt.Sprintf("127.0.0.%d", 1+i%clients)
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
			c, err := d.Dial("tcp", addr.String())
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
			var pkts [][]byte
			for j := 0; j < pipeline; j++ {
				pkts = append(pkts, maxQuery(b, fmt.Sprintf("q%d-%d.block.", i, j), maxTCPQuery))
			}
			if _, err := c.Write(framed(pkts)); err != nil {
				b.Fatal(err)
			}
			go func() {
				for {
					m, err := readFramed(c)
					if err != nil {
						return
					}
					if m.Rcode == dns.RcodeRefused {
						refused.Add(1)
					}
				}
			}()
		}
		total := int64(clients * connsPer * pipeline)
		waitFor(b, "the flood to settle", func() bool { return r.blocked.Load()+refused.Load() == total })
		after := liveMem()
		b.ReportMetric(float64(after.heap-before.heap)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(after.stack-before.stack)/(1<<20), "stack-MiB")
		b.ReportMetric(float64(r.blocked.Load()), "waiting")
		b.ReportMetric(float64(refused.Load()), "refused")
		close(r.release)
		for _, c := range conns {
			_ = c.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.Shutdown(ctx); err != nil {
			b.Error(err)
		}
		cancel()
	}
}

type memUse struct{ heap, stack uint64 }

// liveMem returns the live heap after a collection, and the stacks in use.
func liveMem() memUse {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memUse{heap: ms.HeapAlloc, stack: ms.StackInuse}
}

// startBench serves r on a free loopback port with the default config; the
// caller shuts it down.
func startBench(b *testing.B, r Resolver) (*Server, netip.AddrPort) {
	b.Helper()
	addr := freeAddr(b)
	l, err := Listen(context.Background(), []netip.AddrPort{addr}, 1)
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{Addrs: []netip.AddrPort{addr}}, Deps{Resolver: r}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Serve(l); err != nil {
		b.Fatal(err)
	}
	return s, addr
}
