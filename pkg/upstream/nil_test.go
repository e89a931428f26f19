package upstream

import (
	"context"
	"testing"

	"github.com/miekg/dns"
)

// A nil registerer and a nil logger make a working forwarder: metrics kept
// but not registered, logs discarded.
func TestNewWithNilRegistererAndLogger(t *testing.T) {
	ts := startServer(t, answerA("192.0.2.1"))
	f, err := New(testConfig(ts), nil, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer f.Close()
	resp, _, err := exchange(context.Background(), f, query("example.com.", dns.TypeA))
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	if len(resp.Answer) != 1 {
		t.Errorf("answers: got %d, want 1", len(resp.Answer))
	}
	if got := counterValue(t, f, "requests", ts.addr.String(), protoUDP); got != 1 {
		t.Errorf("udp requests: got %v, want 1", got)
	}
}
