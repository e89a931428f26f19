package upstream

import (
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/nodecache/nodecache/pkg/wire"
)

// Live is the Forwarder the cache and the health checks use, one a config
// reload replaces (Swap) without losing a query.
type Live struct {
	cur atomic.Pointer[Forwarder] // never nil
	// loaded, when set (tests), runs between reading cur and querying it.
	loaded func()
}

// NewLive returns a Live serving f.
func NewLive(f *Forwarder) *Live {
	l := &Live{}
	l.cur.Store(f)
	return l
}

// Exchange asks the live forwarder. A query that reached one just as a
// reload closed it is asked again of its successor, so that no query is
// lost to a reload.
func (l *Live) Exchange(ctx context.Context, key wire.Key, by time.Time) (wire.UpstreamReply, netip.AddrPort, error) {
	f := l.cur.Load()
	if l.loaded != nil {
		l.loaded()
	}
	r, from, err := f.Exchange(ctx, key, by)
	if errors.Is(err, ErrClosed) {
		if next := l.cur.Load(); next != f {
			return next.Exchange(ctx, key, by)
		}
	}
	return r, from, err
}

// Status is the live forwarder's Status.
func (l *Live) Status() []ServerStatus { return l.cur.Load().Status() }

// Healthy is the live forwarder's Healthy.
func (l *Live) Healthy() bool { return l.cur.Load().Healthy() }

// Close closes the live forwarder.
func (l *Live) Close() error { return l.cur.Load().Close() }

// Swap makes f live and closes the one before it: queries in flight on it
// finish on their own deadline.
func (l *Live) Swap(f *Forwarder) {
	_ = l.cur.Swap(f).Close()
}
