package server

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// A nil registerer and a nil logger make a working server: metrics kept but
// not registered, logs discarded.
func TestNewWithNilRegistererAndLogger(t *testing.T) {
	_, addr := startServerReg(t, netip.MustParseAddr("127.0.0.1"), 1, Config{}, Deps{Resolver: &fakeResolver{}}, nil, nil)
	m := new(dns.Msg)
	m.SetQuestion("www.example.", dns.TypeA)
	reply := rawExchange(t, addr, mustPack(t, m), 5*time.Second)
	var r dns.Msg
	if err := r.Unpack(reply); err != nil {
		t.Fatalf("reply: %v", err)
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("reply: got rcode %d with %d answers, want NOERROR with 1", r.Rcode, len(r.Answer))
	}
}
