package cache

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// TestFlightReuse runs misses whose flights end every way a flight ends
// (its one miss waited, gave up, or several waited) and after each a miss
// for another name on a slow upstream: flights are reused (Cache.spent),
// and a reused one must wait for its own upstream reply and answer its own
// name, never see what its last use left in done (a token, or a closed
// channel).
func TestFlightReuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		up := &fakeUpstream{reply: answerA(300), gate: gate}
		c := newTestCache(t, Config{}, up, newClock())
		check := func(what string, qs *question, r wire.Answer, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: Resolve(%s): %v", what, qs.key.PresentationName(), err)
			}
			m := served(t, r.Packed, qs, r.Mode)
			if len(m.Answer) != 1 || m.Answer[0].Header().Name != qs.key.PresentationName() {
				t.Fatalf("%s: got answer %v, want one record for %s", what, m.Answer, qs.key.PresentationName())
			}
		}
		for i := range 30 {
			// one miss waits, and gets its answer
			qs := newQuestion(t, fmt.Sprintf("one%d.example.", i), dns.TypeA)
			wait := resolveAsync(context.Background(), c, qs.key, time.Time{})
			synctest.Wait()
			gate <- struct{}{}
			r, err := wait()
			check("one waiter", qs, r, err)

			// one miss gives up: its flight's token is left unread
			qs = newQuestion(t, fmt.Sprintf("gaveup%d.example.", i), dns.TypeA)
			ctx, cancel := context.WithCancel(context.Background())
			wait = resolveAsync(ctx, c, qs.key, time.Time{})
			synctest.Wait()
			cancel()
			if _, err := wait(); err == nil {
				t.Fatalf("cancelled miss for %s: got an answer, want an error", qs.key.PresentationName())
			}
			gate <- struct{}{}
			synctest.Wait()

			// three misses wait for one flight: done is closed
			qs = newQuestion(t, fmt.Sprintf("three%d.example.", i), dns.TypeA)
			waits := []func() (wire.Answer, error){resolveAsync(context.Background(), c, qs.key, time.Time{})}
			synctest.Wait()
			for range 2 {
				waits = append(waits, resolveAsync(context.Background(), c, qs.key, time.Time{}))
			}
			synctest.Wait()
			gate <- struct{}{}
			for _, w := range waits {
				r, err := w()
				check("three waiters", qs, r, err)
			}
			synctest.Wait()
		}
		if got, want := up.Calls(), 90; got != want {
			t.Errorf("upstream queries: got %d, want %d (one a flight)", got, want)
		}
	})
}
