package upstream

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"time"

	"github.com/nodecache/nodecache/pkg/wire"
)

// aLongTimeAgo is a deadline in the past; setting it unblocks a pending
// read at once.
var aLongTimeAgo = time.Unix(1, 0) //nolint:gochecknoglobals // never mutated

// watch sets a past deadline on c when ctx is cancelled, unblocking any
// read or write. The returned func stops watching; it returns false if the
// deadline has been or is being set, in which case c must not be reused:
// the past deadline may land after the next owner has set its own.
func watch(ctx context.Context, c net.Conn) (stop func() bool) {
	if ctx.Done() == nil {
		return watchedNothing
	}
	return context.AfterFunc(ctx, func() { _ = c.SetDeadline(aLongTimeAgo) })
}

func watchedNothing() bool { return true }

// newID writes a fresh random query ID into the packed message.
func newID(req []byte) uint16 {
	id := uint16(rand.Uint32()) //nolint:gosec // math/rand/v2 is ChaCha8-seeded per thread
	binary.BigEndian.PutUint16(req, id)
	return id
}

// tryServer makes one attempt at s, started at now: UDP on a pooled or
// new socket, then TCP if the reply is truncated; TCP alone when forceTCP
// and for a DNS over TLS server. req is the packed request; its ID is
// rewritten.
func (f *Forwarder) tryServer(ctx context.Context, s *server, req []byte, now, deadline time.Time, forceTCP bool) (wire.UpstreamReply, error) {
	sent := f.tapClock()
	if forceTCP || s.tls != nil {
		r, err := f.tryTCP(ctx, s, req, deadline)
		f.tap(s, true, req, r.Raw, sent)
		return r, err
	}
	r, truncated, err := f.tryUDP(ctx, s, req, now, deadline, false)
	if err != nil || !truncated {
		f.tap(s, false, req, r.Raw, sent)
		return r, err
	}
	f.tap(s, false, req, nil, sent) // the truncated reply is not kept
	s.countError(kindTruncated)
	sent = f.tapClock()
	r, err = f.tryTCP(ctx, s, req, deadline)
	f.tap(s, true, req, r.Raw, sent)
	return r, err
}

// tapClock is the time an attempt starts, for the tap; without a tap, no
// clock is read (the zero time).
func (f *Forwarder) tapClock() time.Time {
	if f.cfg.Tap == nil {
		return time.Time{}
	}
	return time.Now()
}

// tap hands one attempt to Config.Tap, if any: the query sent at sent and
// the reply (nil when none came).
func (f *Forwarder) tap(s *server, tcp bool, query, reply []byte, sent time.Time) {
	if f.cfg.Tap != nil {
		f.cfg.Tap.TapForwarder(s.addr, tcp, query, reply, sent, time.Now())
	}
}
