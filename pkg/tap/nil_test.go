package tap

import (
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A nil registerer and a nil logger make a working Tap: metrics kept but not
// registered, logs discarded (the unreachable socket is logged).
func TestNewWithNilRegistererAndLogger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nobody.sock")
	tp, err := New(Config{Addr: "unix://" + path, Buffer: 1, RetryInterval: time.Hour}, nil, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for range 3 {
		tp.TapClient(netip.MustParseAddrPort("10.0.0.7:1"), netip.MustParseAddrPort("10.0.0.1:53"), false, []byte("q"), []byte("r"), time.Now(), time.Now())
	}
	if got := testutil.ToFloat64(tp.dropped); got != 5 {
		t.Errorf("dropped: got %v, want 5 (6 messages, a queue of 1)", got)
	}
	if err := tp.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}
