//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
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
	return forwardTCPAt(t, ns, "127.0.0.1:0", target)
}

// forwardTCPAt listens on addr inside ns and forwards to target; cleanup
// stops it.
func forwardTCPAt(t testing.TB, ns *netNS, addr, target string) *tcpForwarder {
	t.Helper()
	l, err := ns.listen("tcp", addr)
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

// upstreamZone is what the test upstream serves authoritatively.
const upstreamZone = "example.com."

// upstreamRecords are the records of upstreamZone.
var upstreamRecords = []string{
	"example.com. 300 IN SOA ns.example.com. hostmaster.example.com. 1 7200 1800 86400 60",
	"example.com. 300 IN NS ns.example.com.",
	"ns.example.com. 300 IN A 192.0.2.53",
	"www.example.com. 300 IN A 192.0.2.10",
	"www.example.com. 300 IN AAAA 2001:db8::10",
	"alias.example.com. 300 IN CNAME www.example.com.",
	"txt.example.com. 300 IN TXT \"nodecache e2e\"",
	"lb.example.com. 300 IN A 192.0.2.21",
	"lb.example.com. 300 IN A 192.0.2.22",
	"lb.example.com. 300 IN A 192.0.2.23",
	"lb.example.com. 300 IN A 192.0.2.24",
}

// dnsUpstream is an authoritative miekg/dns server for upstreamZone on UDP
// and TCP of one address inside a netns, with its own handler (never the
// global mux). It counts the queries it receives.
type dnsUpstream struct {
	Addr       string // ip:port, valid inside the netns it was started in
	Queries    atomic.Int64
	TCPQueries atomic.Int64 // of Queries, those that came over TCP

	rrs     map[string][]dns.RR // lowercased owner name → records
	servers []*dns.Server
}

// startUpstream serves upstreamZone on ip (any free port) inside ns; cleanup
// stops it.
func startUpstream(t testing.TB, ns *netNS, ip string) *dnsUpstream {
	t.Helper()
	u := &dnsUpstream{rrs: map[string][]dns.RR{}}
	for _, s := range upstreamRecords {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatalf("parsing upstream record %q: %v", s, err)
		}
		name := strings.ToLower(rr.Header().Name)
		u.rrs[name] = append(u.rrs[name], rr)
	}
	var (
		l   net.Listener
		pc  net.PacketConn
		err error
	)
	for range 10 { // the UDP port of a fresh TCP port may be taken
		if l, err = ns.listen("tcp", net.JoinHostPort(ip, "0")); err != nil {
			t.Fatalf("upstream tcp listen: %v", err)
		}
		if pc, err = ns.listenPacket("udp", l.Addr().String()); err == nil {
			break
		}
		_ = l.Close()
	}
	if err != nil {
		t.Fatalf("upstream udp listen: %v", err)
	}
	u.Addr = l.Addr().String()
	mux := dns.NewServeMux()
	mux.HandleFunc(".", u.serveDNS)
	var started sync.WaitGroup
	started.Add(2)
	u.servers = []*dns.Server{
		{Listener: l, Handler: mux, NotifyStartedFunc: started.Done},
		{PacketConn: pc, Handler: mux, NotifyStartedFunc: started.Done},
	}
	var done sync.WaitGroup
	for _, s := range u.servers {
		done.Add(1)
		go func() {
			defer done.Done()
			if err := s.ActivateAndServe(); err != nil {
				t.Errorf("upstream server: %v", err)
			}
		}()
	}
	started.Wait()
	t.Cleanup(func() {
		for _, s := range u.servers {
			_ = s.Shutdown()
		}
		done.Wait()
	})
	return u
}

func (u *dnsUpstream) serveDNS(w dns.ResponseWriter, r *dns.Msg) {
	u.Queries.Add(1)
	if w.LocalAddr().Network() == "tcp" {
		u.TCPQueries.Add(1)
	}
	m := new(dns.Msg)
	m.SetReply(r)
	if len(r.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	name := strings.ToLower(q.Name)
	if !dns.IsSubDomain(upstreamZone, name) {
		m.Rcode = dns.RcodeRefused
		_ = w.WriteMsg(m)
		return
	}
	m.Authoritative = true
	rrs, ok := u.rrs[name]
	for _, rr := range rrs {
		if rr.Header().Rrtype == q.Qtype || rr.Header().Rrtype == dns.TypeCNAME {
			m.Answer = append(m.Answer, dns.Copy(rr))
		}
	}
	if len(m.Answer) == 0 {
		if !ok {
			m.Rcode = dns.RcodeNameError
		}
		m.Ns = append(m.Ns, dns.Copy(u.rrs[upstreamZone][0]))
	}
	_ = w.WriteMsg(m)
}

func (u *dnsUpstream) String() string { return fmt.Sprintf("upstream %s", u.Addr) }
