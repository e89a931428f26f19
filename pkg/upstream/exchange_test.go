package upstream

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

func TestExchangeUDP(t *testing.T) {
	var seenID atomic.Uint32
	var seen atomic.Pointer[dns.Msg]
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		seenID.Store(uint32(r.Id))
		seen.Store(r.Copy())
		answerA("192.0.2.1")(w, r)
	})
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})

	req := query("Example.COM.", dns.TypeA)
	req.SetEdns0(1232, true)
	resp, from, err := exchange(context.Background(), f, req)
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	if got, want := resp.Answer[0].(*dns.A).A.String(), "192.0.2.1"; got != want {
		t.Errorf("answer: got %s, want %s", got, want)
	}
	if from != ts.addr {
		t.Errorf("from: got %v, want %v", from, ts.addr)
	}
	if resp.Id != uint16(seenID.Load()) {
		t.Errorf("reply ID: got %d, want the ID the server saw, %d", resp.Id, seenID.Load())
	}
	// The key's query: its name (in 0x20 case), RD, EDNS with the key's DO.
	if m := seen.Load(); m == nil || !strings.EqualFold(m.Question[0].Name, "example.com.") || !m.RecursionDesired ||
		m.IsEdns0() == nil || m.IsEdns0().UDPSize() != wire.DefaultUDPSize || !m.IsEdns0().Do() {
		t.Errorf("query seen upstream: got %v, want example.com. A with RD and EDNS (%d, DO)", m, wire.DefaultUDPSize)
	}
	if got := counterValue(t, f, "requests", ts.addr.String(), protoUDP); got != 1 {
		t.Errorf("udp requests: got %v, want 1", got)
	}
	if got := counterValue(t, f, "requests", ts.addr.String(), protoTCP); got != 0 {
		t.Errorf("tcp requests: got %v, want 0", got)
	}
}

func TestExchangeTruncatedRetriesOverTCP(t *testing.T) {
	ts := startServer(t, truncateUDP("192.0.2.7"))
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})

	got, _ := exchangeA(t, f, "big.example.")
	if want := "192.0.2.7"; got != want {
		t.Errorf("answer: got %s, want %s", got, want)
	}
	if got, want := ts.udpQueries.Load(), int64(1); got != want {
		t.Errorf("udp queries: got %d, want %d", got, want)
	}
	if got, want := ts.tcpQueries.Load(), int64(1); got != want {
		t.Errorf("tcp queries: got %d, want %d", got, want)
	}
	if got := counterValue(t, f, "errors", ts.addr.String(), kindTruncated); got != 1 {
		t.Errorf("truncated errors: got %v, want 1", got)
	}
}

func TestTCPConnectionReuse(t *testing.T) {
	ts := startServer(t, truncateUDP("192.0.2.8"))
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})

	const n = 5
	for i := 0; i < n; i++ {
		exchangeA(t, f, "big.example.")
	}
	if got, want := ts.tcpQueries.Load(), int64(n); got != want {
		t.Errorf("tcp queries: got %d, want %d", got, want)
	}
	if got, want := ts.accepts.Load(), int64(1); got != want {
		t.Errorf("tcp connections accepted: got %d, want %d", got, want)
	}
	if got, want := f.all[0].tcp.size(), 1; got != want {
		t.Errorf("idle pooled connections: got %d, want %d", got, want)
	}
}

// oneShotTCP serves one query per TCP connection and then closes it, as a
// server whose idle timeout has passed would.
func oneShotTCP(ip string) func(net.Listener) {
	return func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dc := &dns.Conn{Conn: c}
			if r, err := dc.ReadMsg(); err == nil {
				_ = dc.WriteMsg(replyA(r, ip))
			}
			_ = c.Close()
		}
	}
}

func TestStalePooledConnectionIsReplaced(t *testing.T) {
	ts := startServerWith(t, truncateUDP("192.0.2.9"), oneShotTCP("192.0.2.9"))
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})

	for i := 0; i < 3; i++ {
		if got, _ := exchangeA(t, f, "big.example."); got != "192.0.2.9" {
			t.Fatalf("query %d: got %s, want 192.0.2.9", i, got)
		}
	}
	// Each query after the first found its pooled connection closed by the
	// server and dialled again without failing the query.
	if got, want := ts.accepts.Load(), int64(3); got != want {
		t.Errorf("tcp connections accepted: got %d, want %d", got, want)
	}
	if got := counterValue(t, f, "errors", ts.addr.String(), kindNetwork); got != 0 {
		t.Errorf("network errors: got %v, want 0", got)
	}
}

func TestSpoofedRepliesIgnored(t *testing.T) {
	tests := []struct {
		name  string
		spoof func(r *dns.Msg) []byte
		kind  string
	}{
		{"wrong ID", func(r *dns.Msg) []byte {
			m := replyA(r, "203.0.113.66")
			m.Id = r.Id + 1
			return pack(t, m)
		}, kindSpoofed},
		{"wrong name", func(r *dns.Msg) []byte {
			m := replyA(r, "203.0.113.66")
			m.Question[0].Name = "evil.example."
			return pack(t, m)
		}, kindSpoofed},
		{"wrong type", func(r *dns.Msg) []byte {
			m := replyA(r, "203.0.113.66")
			m.Question[0].Qtype = dns.TypeAAAA
			return pack(t, m)
		}, kindSpoofed},
		{"wrong class", func(r *dns.Msg) []byte {
			m := replyA(r, "203.0.113.66")
			m.Question[0].Qclass = dns.ClassCHAOS
			return pack(t, m)
		}, kindSpoofed},
		{"QR clear", func(r *dns.Msg) []byte {
			m := replyA(r, "203.0.113.66")
			m.Response = false
			return pack(t, m)
		}, kindSpoofed},
		{"short datagram", func(r *dns.Msg) []byte {
			return []byte{byte(r.Id >> 8), byte(r.Id), 0x80}
		}, kindMalformed},
		{"garbage after question", func(r *dns.Msg) []byte {
			return append(pack(t, replyA(r, "203.0.113.66"))[:40], 0xff, 0xff)
		}, kindMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
				_, _ = w.Write(tt.spoof(r))
				_ = w.WriteMsg(replyA(r, "192.0.2.1"))
			})
			f, _ := newTestForwarder(t, testConfig(ts), hooks{})
			got, _ := exchangeA(t, f, "www.example.")
			if want := "192.0.2.1"; got != want {
				t.Errorf("answer: got %s, want %s", got, want)
			}
			if got := counterValue(t, f, "errors", ts.addr.String(), tt.kind); got != 1 {
				t.Errorf("%s errors: got %v, want 1", tt.kind, got)
			}
		})
	}
}

// A reply with the right ID and question from another port of the same
// host must not be taken.
func TestReplyFromOtherAddressIgnored(t *testing.T) {
	spoofer, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spoofer.Close() })
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		if _, err := spoofer.WriteTo(pack(t, replyA(r, "203.0.113.66")), w.RemoteAddr()); err != nil {
			t.Errorf("spoofing: %v", err)
		}
		_ = w.WriteMsg(replyA(r, "192.0.2.1"))
	})
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})
	got, _ := exchangeA(t, f, "www.example.")
	if want := "192.0.2.1"; got != want {
		t.Errorf("answer: got %s, want %s", got, want)
	}
}

func pack(tb testing.TB, m *dns.Msg) []byte {
	tb.Helper()
	b, err := m.Pack()
	if err != nil {
		tb.Fatalf("packing: %v", err)
	}
	return b
}

func TestExchangeBadRequest(t *testing.T) {
	ts := startServer(t, answerA("192.0.2.1"))
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})
	long := wire.Key{Name: strings.Repeat("\x3f"+strings.Repeat("a", 63), 4) + "\x00", Type: dns.TypeA, Class: dns.ClassINET}
	for name, key := range map[string]wire.Key{"zero key": {}, "name over 255 bytes": long} {
		if _, _, err := f.Exchange(context.Background(), key, time.Time{}); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: got %v, want ErrBadRequest", name, err)
		}
	}
}

// FuzzParseReply feeds arbitrary datagrams to the reply check: it must not
// panic, and whatever it accepts must carry the ID and question asked.
func FuzzParseReply(f *testing.F) {
	r := query("www.example.", dns.TypeA)
	r.Id = 0x1234
	good, err := replyA(r, "192.0.2.1").Pack()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:20])
	f.Add([]byte{0x12, 0x34, 0x82, 0, 0, 1})
	req, err := r.Pack()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r wire.UpstreamReply
		if v := parseReply(data, 0x1234, req, &r); v != replyOK && v != replyTruncatedWhole {
			if r.Raw != nil {
				t.Fatalf("verdict %d, and the reply was written", v)
			}
			return
		}
		resp := new(dns.Msg)
		if err := resp.Unpack(data); err != nil {
			t.Fatalf("accepted a reply that does not unpack: %v", err)
		}
		if r.Scanned == (r.Msg != nil) || !bytes.Equal(r.Raw, data) {
			t.Fatalf("accepted a reply read %t scanned, %t unpacked, want one of them, of the bytes given", r.Scanned, r.Msg != nil)
		}
		if resp.Id != 0x1234 || !resp.Response || !sameQuestion(resp, req) || resp.Rcode != r.Rcode() {
			t.Errorf("accepted a reply for another query, or got its rcode (%d) wrong: %v", r.Rcode(), resp)
		}
	})
}

// bigTXT answers with 30 TXT records of 200 bytes, about 6.5 KB, over UDP
// as well, whatever buffer size the client advertised.
func bigTXT(r *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(r)
	for i := 0; i < 30; i++ {
		m.Answer = append(m.Answer, &dns.TXT{
			Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
			Txt: []string{strings.Repeat(string(rune('a'+i%26)), 200)},
		})
	}
	return m
}

// TestLargeUDPReplies checks a reply larger than the read buffer over
// UDP, sent whatever the query advertised: the cut datagram sends the
// query to TCP, which brings the whole reply.
func TestLargeUDPReplies(t *testing.T) {
	var seenSize atomic.Uint32
	ts := startServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		if opt := r.IsEdns0(); opt != nil && w.LocalAddr().Network() == "udp" {
			seenSize.Store(uint32(opt.UDPSize()))
		}
		_ = w.WriteMsg(bigTXT(r))
	})
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})
	resp, _, err := exchange(context.Background(), f, query("big.example.", dns.TypeTXT))
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	if got, want := len(resp.Answer), 30; got != want {
		t.Errorf("answers: got %d, want %d", got, want)
	}
	if got := resp.Len(); got <= bufSize {
		t.Errorf("reply size: got %d, want more than %d", got, bufSize)
	}
	if got, want := seenSize.Load(), uint32(wire.DefaultUDPSize); got != want {
		t.Errorf("EDNS size seen upstream: got %d, want %d", got, want)
	}
	if got := ts.tcpQueries.Load(); got != 1 {
		t.Errorf("tcp queries: got %d, want 1", got)
	}
}
