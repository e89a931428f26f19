package cache

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// lendingUpstream is fakeUpstream whose replies are lent their buffers,
// as the forwarder's UDP replies are; a buffer given back is written over
// at once, as the next query read into it would.
type lendingUpstream struct {
	fakeUpstream
	mu       sync.Mutex // guards following
	lent     int
	recycled int
}

func (l *lendingUpstream) Exchange(ctx context.Context, key wire.Key, by time.Time) (wire.UpstreamReply, netip.AddrPort, error) {
	r, from, err := l.fakeUpstream.Exchange(ctx, key, by)
	if err != nil {
		return r, from, err
	}
	l.mu.Lock()
	l.lent++
	l.mu.Unlock()
	buf := r.Raw
	return r.Lend(&buf, l), from, nil
}

func (l *lendingUpstream) Recycle(buf *[]byte) {
	clear(*buf)
	l.mu.Lock()
	l.recycled++
	l.mu.Unlock()
}

// TestResolveReleasesLentReply checks that the cache gives a lent reply's
// buffer back once it has stored it, and that neither the answer returned
// nor the entry stored reads from that buffer afterwards, for a reply
// stored from its bytes (scanned) and for one unpacked (spelled out).
func TestResolveReleasesLentReply(t *testing.T) {
	for _, spelled := range []bool{false, true} {
		up := &lendingUpstream{fakeUpstream: fakeUpstream{reply: answerA(300), spelled: spelled}}
		c := newTestCache(t, Config{}, up, newClock())
		qs := newQuestion(t, "example.org.", dns.TypeA)
		for i, want := range []wire.Source{wire.SourceUpstream, wire.SourceCache} {
			r := resolve(t, c, qs)
			if r.Source != want {
				t.Errorf("spelled %t, query %d: got source %v, want %v", spelled, i, r.Source, want)
			}
			m := served(t, r.Packed, qs, r.Mode)
			if len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
				t.Errorf("spelled %t, query %d: got %v, want one A 192.0.2.1", spelled, i, m.Answer)
			}
		}
		up.mu.Lock()
		lent, recycled := up.lent, up.recycled
		up.mu.Unlock()
		if lent != 1 || recycled != 1 {
			t.Errorf("spelled %t: got %d replies lent and %d buffers given back, want 1 and 1", spelled, lent, recycled)
		}
	}
}
