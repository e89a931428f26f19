package cache

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// rawUpstream is an Exchanger whose reply is the bytes raw returns, as
// the forwarder would read them off the wire.
type rawUpstream func(key wire.Key) []byte

func (f rawUpstream) Exchange(_ context.Context, key wire.Key, _ time.Time) (wire.UpstreamReply, netip.AddrPort, error) {
	r, err := wire.ReadUpstream(f(key))
	return r, testServer, err
}

// emptySOAReply is the reply to key with rcode, answer (packed by
// miekg/dns) and then, in the authority section, an SOA for key's name
// whose rdata is empty: malformed, yet miekg/dns unpacks it.
func emptySOAReply(tb testing.TB, key wire.Key, rcode int, answer ...dns.RR) []byte {
	tb.Helper()
	m := new(dns.Msg)
	m.SetRcode(request(key), rcode)
	m.Answer = answer
	b, err := m.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	b[9] = 1 // NSCOUNT
	// The question's name (a pointer to offset 12), SOA, IN, TTL 60, RDLENGTH 0.
	return append(b, 0xc0, 12, 0, 6, 0, 1, 0, 0, 0, 60, 0, 0)
}

// TestEmptySOAReplyFails checks that an upstream reply with an empty-rdata
// SOA, which miekg/dns unpacks but packs into a reply nobody can parse,
// fails the query (SERVFAIL at the server) and is neither cached nor
// passed on, whether the policy would have cached it or not.
func TestEmptySOAReplyFails(t *testing.T) {
	qs := newQuestion(t, "broken.example.", dns.TypeA)
	a := &dns.A{Hdr: dns.RR_Header{Name: "broken.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: []byte{192, 0, 2, 1}}
	for _, tc := range []struct {
		name   string
		rcode  int
		answer []dns.RR
	}{
		{"nxdomain, not cacheable", dns.RcodeNameError, nil},
		{"answer, cacheable", dns.RcodeSuccess, []dns.RR{a}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := emptySOAReply(t, qs.key, tc.rcode, tc.answer...)
			if _, ok := wire.ScanUpstream(raw); ok {
				t.Fatal("ScanUpstream took the reply: the test no longer reaches the unpacked path")
			}
			c := newTestCache(t, Config{}, rawUpstream(func(wire.Key) []byte { return raw }), newClock())
			r, err := c.Resolve(context.Background(), qs.key, time.Time{})
			if err == nil {
				t.Fatalf("Resolve answered %v, want an error", r.Packed.Rcode())
			}
			if got := c.met.uncacheable[reasonBadReply].Load(); got != 1 {
				t.Errorf("uncacheable bad_reply = %d, want 1", got)
			}
			var all uint64 // one reply, one reason
			for i := range c.met.uncacheable {
				all += c.met.uncacheable[i].Load()
			}
			if all != 1 {
				t.Errorf("uncacheable over every reason = %d, want 1 (bad_reply alone)", all)
			}
			if n := c.Stats().Entries; n != 0 {
				t.Errorf("cache holds %d entries, want 0", n)
			}
		})
	}
}
