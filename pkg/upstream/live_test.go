package upstream

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// TestLiveSwapLosesNoQuery holds a query between reading the live
// forwarder and asking it, swaps the forwarder (closing the one read)
// meanwhile, and checks that the query is answered by the new one.
func TestLiveSwapLosesNoQuery(t *testing.T) {
	upA, upB := startServer(t, answerA("192.0.2.1")), startServer(t, answerA("192.0.2.2"))
	fwdA, _ := newTestForwarder(t, testConfig(upA), hooks{})
	fwdB, _ := newTestForwarder(t, testConfig(upB), hooks{})
	l := NewLive(fwdA)
	l.loaded = func() { l.loaded = nil; l.Swap(fwdB) }
	key, err := wire.NewKey("www.example.org.", dns.TypeA, dns.ClassINET, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, from, err := l.Exchange(context.Background(), key, time.Time{}); err != nil || from != upB.addr {
		t.Fatalf("got %v from %v, want an answer from the new forwarder %v", err, from, upB.addr)
	}
	if n := upA.udpQueries.Load() + upA.tcpQueries.Load(); n != 0 {
		t.Errorf("the closed forwarder's server got %d queries, want 0", n)
	}
}
