// Package agenttest runs a nodecache agent on loopback for tests: a
// loopback upstream to forward to, the flags of an unprivileged agent with
// the example fixture as its cluster zone, and a runner that waits until
// the agent is ready and stops it when the test ends.
//
// It does not import internal/agent, so that the agent's own tests can use
// it too: the caller builds the agent and hands its Run method to Start.
package agenttest

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/testnet"
)

// Upstream is a loopback authoritative server for example.org. that counts
// queries and can be made silent. Names starting with "servfail" get
// SERVFAIL, names starting with "nx" NXDOMAIN with an SOA (minimum 30s),
// and A queries for other names 192.0.2.7 with TTL 300.
type Upstream struct {
	Addr    netip.AddrPort
	Queries atomic.Int64 // queries received
	Silent  atomic.Bool  // when set, queries get no reply
}

// StartUpstream serves an Upstream on 127.0.0.1 until the test ends.
func StartUpstream(tb testing.TB) *Upstream {
	tb.Helper()
	u := &Upstream{}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	u.Addr = pc.LocalAddr().(*net.UDPAddr).AddrPort()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		u.Queries.Add(1)
		if u.Silent.Load() {
			return
		}
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		switch {
		case strings.HasPrefix(strings.ToLower(q.Name), "servfail"):
			m.Rcode = dns.RcodeServerFailure
		case strings.HasPrefix(strings.ToLower(q.Name), "nx"):
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: "example.org.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60},
				Ns: "ns.example.org.", Mbox: "h.example.org.", Serial: 1, Minttl: 30}}
		case q.Qtype == dns.TypeA:
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 7)}}
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: h}
	go func() { _ = srv.ActivateAndServe() }()
	tb.Cleanup(func() { _ = srv.Shutdown() })
	return u
}

// FreePort returns a loopback port, free for TCP and UDP, that no other
// test in this process gets (see testnet.FreePort).
func FreePort(tb testing.TB) uint16 {
	tb.Helper()
	p, err := testnet.FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// Fixture is the path of deploy/examples/fixture.yaml, the cluster zone
// the agents of Args serve.
func Fixture() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "deploy", "examples", "fixture.yaml")
}

// Args are the `nodecache run` flags of an unprivileged agent on
// 127.0.0.1:port that forwards to up, serves the fixture zone, keeps its
// sockets in dir and its health and metrics on free loopback ports; extra
// flags come last.
func Args(tb testing.TB, up netip.AddrPort, dir string, port uint16, extra ...string) []string {
	tb.Helper()
	return append([]string{
		"--local-ip", "127.0.0.1", "--port", fmt.Sprint(port),
		"--setup-interface=false", "--setup-iptables=false",
		"--upstream", up.String(), "--upstream-timeout", "300ms", "--upstream-deadline", "600ms",
		"--health-addr", fmt.Sprintf("127.0.0.1:%d", FreePort(tb)),
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", FreePort(tb)),
		"--admin-socket", filepath.Join(dir, "admin.sock"),
		"--handover-socket", filepath.Join(dir, "handover.sock"),
		"--fixture", Fixture(),
	}, extra...)
}

// Logger sends log lines to the test log (shown on failure), each with
// the attribute agent=name.
func Logger(tb testing.TB, name string) *slog.Logger {
	tb.Helper()
	return slog.New(slog.NewTextHandler(logWriter{tb}, nil)).With("agent", name)
}

type logWriter struct{ tb testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Running is an agent's Run in a goroutine of the test process.
type Running struct {
	cancel context.CancelFunc
	errc   chan error // receives run's result once
	once   sync.Once
	err    error
}

// Launch calls run in a goroutine and returns at once; the test's cleanup
// stops it.
func Launch(tb testing.TB, run func(context.Context) error) *Running {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{cancel: cancel, errc: make(chan error, 1)}
	go func() { r.errc <- run(ctx) }()
	tb.Cleanup(func() { _ = r.Stop() })
	return r
}

// Start launches run and waits until the agent's health listener at
// healthAddr says ready: listeners serving and the zone synced (before
// that the agent answers SERVFAIL for cluster names).
func Start(tb testing.TB, healthAddr string, run func(context.Context) error) *Running {
	tb.Helper()
	r := Launch(tb, run)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if resp, err := http.Get("http://" + healthAddr + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r
			}
		}
		select {
		case err := <-r.errc:
			tb.Fatalf("agent exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatal("agent not ready within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Wait returns run's result once the agent has exited by itself, or an
// error after d.
func (r *Running) Wait(d time.Duration) error {
	select {
	case err := <-r.errc:
		r.once.Do(func() { r.err = err })
		return err
	case <-time.After(d):
		return fmt.Errorf("agent did not exit within %v", d)
	}
}

// Stop cancels the agent (as SIGTERM does) and returns run's result.
func (r *Running) Stop() error {
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.errc:
		case <-time.After(15 * time.Second):
			r.err = fmt.Errorf("agent did not stop")
		}
	})
	return r.err
}

// Ask sends name/qtype to addr over UDP and returns the reply.
func Ask(tb testing.TB, addr string, name string, qtype uint16) *dns.Msg {
	tb.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, _, err := (&dns.Client{Timeout: 3 * time.Second}).Exchange(m, addr)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return r
}

// Serve runs srv (with its PacketConn or Listener set) until the test
// ends, and returns once it serves.
func Serve(t testing.TB, srv *dns.Server) {
	t.Helper()
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
}

// Authoritative answers like a small authoritative server: A records with
// ip for any name (TTL 600), NXDOMAIN with an SOA for names starting "nx".
// With tcpOnly it ignores UDP queries.
func Authoritative(ip string, tcpOnly bool) dns.HandlerFunc {
	return func(w dns.ResponseWriter, r *dns.Msg) {
		if tcpOnly && w.LocalAddr().Network() == "udp" {
			return
		}
		m := new(dns.Msg)
		m.SetReply(r)
		m.Authoritative = true
		q := r.Question[0]
		switch {
		case strings.HasPrefix(strings.ToLower(q.Name), "nx"):
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 300},
				Ns: "ns.example.", Mbox: "h.example.", Serial: 1, Refresh: 60, Retry: 60, Expire: 60, Minttl: 300}}
		case q.Qtype == dns.TypeA:
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 600}, A: net.ParseIP(ip)}}
		}
		_ = w.WriteMsg(m)
	}
}

// WithoutFlag is args without the flag name and the value after it.
func WithoutFlag(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		if args[i] == name {
			i++
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// WaitFor polls cond until it holds, failing the test after 10s.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: gave up after 10s", what)
		}
	}
}

// StartDoTServer serves h over DNS over TLS on loopback with a
// certificate for "dns.test" from a test CA written to dir, and returns
// the listener and the CA file; accepts, when not nil, counts the
// connections.
func StartDoTServer(t testing.TB, dir string, accepts *atomic.Int64, h dns.HandlerFunc) (net.Listener, string) {
	t.Helper()
	ca, err := testnet.NewTestCA("dns.test")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &ca.Server)
	if err != nil {
		t.Fatal(err)
	}
	if accepts == nil {
		accepts = new(atomic.Int64)
	}
	Serve(t, &dns.Server{Listener: countAccepts{ln, accepts}, Handler: h})
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ln, caFile
}

// countAccepts counts the connections its listener accepts.
type countAccepts struct {
	net.Listener
	n *atomic.Int64
}

func (l countAccepts) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}
