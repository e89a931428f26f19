package upstream

import (
	"context"
	"testing"

	"github.com/miekg/dns"
)

// BenchmarkExchangeUDP measures one forwarded query over loopback UDP,
// server included (go test -bench Exchange -benchmem ./pkg/upstream/).
func BenchmarkExchangeUDP(b *testing.B) {
	ts := startServer(b, answerA("192.0.2.1"))
	f, _ := newTestForwarder(b, testConfig(ts), hooks{})
	req := query("www.example.", dns.TypeA)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := f.Exchange(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExchangeTCP measures a query that is truncated over UDP and
// retried on a pooled TCP connection.
func BenchmarkExchangeTCP(b *testing.B) {
	ts := startServer(b, truncateUDP("192.0.2.1"))
	f, _ := newTestForwarder(b, testConfig(ts), hooks{})
	req := query("www.example.", dns.TypeA)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := f.Exchange(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseReplySpoofed measures the cost of ignoring a datagram with
// a wrong ID, which must not allocate.
func BenchmarkParseReplySpoofed(b *testing.B) {
	r := query("www.example.", dns.TypeA)
	wire, err := replyA(r, "192.0.2.1").Pack()
	if err != nil {
		b.Fatal(err)
	}
	q := &r.Question[0]
	b.ReportAllocs()
	for b.Loop() {
		if _, v := parseReply(wire, r.Id+1, q); v != replySpoofed {
			b.Fatalf("verdict: got %d, want spoofed", v)
		}
	}
}
