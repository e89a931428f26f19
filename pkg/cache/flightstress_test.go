package cache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// poisonUpstream answers every query with an uncacheable A record (TTL 0,
// so that every Resolve is a miss) after a random pause, lending each
// reply a buffer of its own; a buffer given back is written over at once
// and marked, so that a buffer read after its release, or given back
// twice, shows.
type poisonUpstream struct {
	mu   sync.Mutex
	out  map[*[]byte]bool // lent and not yet given back
	lent int
	back int
	errs []string
}

func (p *poisonUpstream) Exchange(ctx context.Context, key wire.Key, _ time.Time) (wire.UpstreamReply, netip.AddrPort, error) {
	for range rand.IntN(4) {
		runtime.Gosched()
	}
	if rand.IntN(8) == 0 {
		return wire.UpstreamReply{}, netip.AddrPort{}, errUpstream
	}
	if ctx.Err() != nil {
		return wire.UpstreamReply{}, netip.AddrPort{}, ctx.Err()
	}
	m := replyA(request(key), 0)
	raw, err := m.Pack()
	if err != nil {
		return wire.UpstreamReply{}, netip.AddrPort{}, err
	}
	buf := make([]byte, 512)
	n := copy(buf, raw)
	r, err := wire.ReadUpstream(buf[:n])
	if err != nil {
		return wire.UpstreamReply{}, netip.AddrPort{}, err
	}
	p.mu.Lock()
	p.out[&buf] = true
	p.lent++
	p.mu.Unlock()
	return r.Lend(&buf, p), testServer, nil
}

func (p *poisonUpstream) Recycle(buf *[]byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.out[buf] {
		p.errs = append(p.errs, "a buffer given back twice, or never lent")
		return
	}
	delete(p.out, buf)
	p.back++
	for i := range *buf {
		(*buf)[i] = 0xff
	}
}

// TestFlightReuseConcurrent runs many concurrent misses over a few names,
// flights shared, reused and (FlightMaxAge) replaced, some callers giving
// up at random, some background refreshes among them: every answer must be
// its own name's (a miss that saw a reused flight, or a stale token in its
// done channel, would get another name's answer, or none), and every lent
// buffer is given back once.
func TestFlightReuseConcurrent(t *testing.T) {
	up := &poisonUpstream{out: make(map[*[]byte]bool)}
	clk := newClock()
	c := newTestCache(t, Config{}, up, clk)
	var names []*question
	for i := range 6 {
		names = append(names, newQuestion(t, fmt.Sprintf("n%d.example.", i), dns.TypeA))
	}
	const goroutines, each = 12, 1500
	var wg sync.WaitGroup
	errs := make(chan string, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				qs := names[rand.IntN(len(names))]
				switch {
				case g == 0 && i%50 == 0:
					clk.Advance(DefaultFlightMaxAge) // later misses start a flight beside the running one
					continue
				case g == 1 && i%3 == 0:
					_, _ = c.refresh(qs.key)
					continue
				}
				ctx, cancel := context.WithCancel(context.Background())
				if rand.IntN(4) == 0 {
					go func() {
						runtime.Gosched()
						cancel()
					}()
				}
				r, err := c.Resolve(ctx, qs.key, time.Time{})
				cancel()
				if err != nil {
					continue // the upstream failed, or the caller gave up
				}
				out := r.Packed.AppendReply(nil, &qs.q, r.Mode, 65535)
				m := new(dns.Msg)
				if err := m.Unpack(out); err != nil {
					errs <- fmt.Sprintf("%s: unpacking the answer: %v", qs.key.PresentationName(), err)
					return
				}
				if len(m.Answer) != 1 || m.Answer[0].Header().Name != qs.key.PresentationName() {
					errs <- fmt.Sprintf("%s: got answer %v", qs.key.PresentationName(), m.Answer)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	c.Close()
	up.mu.Lock()
	defer up.mu.Unlock()
	for _, e := range up.errs {
		t.Error(e)
	}
	if up.lent != up.back || len(up.out) != 0 {
		t.Errorf("got %d replies lent, %d buffers given back, %d still out; want all given back", up.lent, up.back, len(up.out))
	}
	if up.lent == 0 {
		t.Error("no reply was lent: the test tested nothing")
	}
}
