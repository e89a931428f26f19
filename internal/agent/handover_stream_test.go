package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/handover"
)

// writeRecorder keeps what is written and the largest single write.
type writeRecorder struct {
	bytes.Buffer
	maxWrite int
}

func (w *writeRecorder) Write(p []byte) (int, error) {
	w.maxWrite = max(w.maxWrite, len(p))
	return w.Buffer.Write(p)
}

// TestCacheIsStreamedToTheSuccessor: the warm cache goes to the connection
// record by record, never as one buffer of the whole dump, and a successor
// reading it imports every entry.
func TestCacheIsStreamedToTheSuccessor(t *testing.T) {
	up := startUpstream(t)
	a := startAgent(t, testAgentConfig(t, up.Addr, t.TempDir(), freePort(t))).agent()
	const names = 3000
	for i := range names {
		m := new(dns.Msg)
		m.SetQuestion(fmt.Sprintf("host-%d.example.org.", i), dns.TypeA)
		pkt, _ := m.Pack()
		if _, _, err := a.server.Query(context.Background(), pkt, a.addrs[0].Addr()); err != nil {
			t.Fatal(err)
		}
	}
	var w writeRecorder
	n, err := a.sendCache(&w)
	if err != nil || n < names {
		t.Fatalf("sendCache: got %d entries, %v; want at least %d, nil", n, err, names)
	}
	t.Logf("streamed %d entries, %d bytes, largest write %d bytes", n, w.Len(), w.maxWrite)
	if w.maxWrite > 64<<10 || w.maxWrite*8 > w.Len() {
		t.Errorf("largest single write: got %d of %d bytes, want the dump written in pieces of at most 64 KiB", w.maxWrite, w.Len())
	}
	if got := binary.BigEndian.Uint32(w.Bytes()); got != handover.StreamedCache {
		t.Errorf("length field: got %#x, want the streamed marker %#x", got, uint32(handover.StreamedCache))
	}
	b := startAgent(t, testAgentConfig(t, up.Addr, t.TempDir(), freePort(t))).agent()
	got, err := b.cache.Import(bytes.NewReader(w.Bytes()[4:]), time.Now().Add(10*time.Second))
	if err != nil || got != n {
		t.Errorf("Import of the stream: got %d, %v; want %d, nil", got, err, n)
	}
}
