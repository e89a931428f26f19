package upstream

import (
	"cmp"
	"context"
	"time"

	"github.com/nodecache/nodecache/pkg/wire"
)

// tryUDP sends the query on a connected UDP socket of s's pool: the kernel
// gave it a random ephemeral port and drops datagrams from any address but
// the server's. The socket goes back to the pool only after a clean round
// trip (see releaseUDP).
// A probe is not counted as a request. now is the time the attempt
// started (for the pool's socket ages).
func (f *Forwarder) tryUDP(ctx context.Context, s *server, req []byte, now, deadline time.Time, probe bool) (wire.UpstreamReply, bool, error) {
	// The deadline is set (by udpSocket) before the watch is checked, so
	// that a cancel that fired already is not overwritten by it.
	u, err := s.udpSocket(now, deadline)
	if err != nil {
		return wire.UpstreamReply{}, false, classify(ctx, s.addr, protoUDP, err)
	}
	if !u.watch(ctx) {
		_ = u.Close()
		if ctx.Err() != nil {
			return wire.UpstreamReply{}, false, classify(ctx, s.addr, protoUDP, ctx.Err())
		}
		u, err = dialUDP(s.udpAddr, time.Now()) // a watch of another context fired on it
		if err != nil {
			return wire.UpstreamReply{}, false, classify(ctx, s.addr, protoUDP, err)
		}
		if err := u.conn.SetDeadline(deadline); err != nil || !u.watch(ctx) {
			_ = u.Close()
			return wire.UpstreamReply{}, false, classify(ctx, s.addr, protoUDP, cmp.Or(err, ctx.Err()))
		}
	}
	r, truncated, clean, err := f.roundTripUDP(s, u, req, probe)
	// Not done: the watch has not fired and stays for the socket's next
	// query.
	s.releaseUDP(u, clean && ctx.Err() == nil)
	if err != nil {
		return wire.UpstreamReply{}, false, classify(ctx, s.addr, protoUDP, err)
	}
	return r, truncated, nil
}

// roundTripUDP sends req on u and reads datagrams until one answers it.
// clean reports a valid, untruncated reply that was the only datagram
// read. The returned error is the raw socket error. The reply is read in
// a buffer of f's pool, lent to it (wire.UpstreamReply.Lend) rather than
// copied: whoever stores it releases it.
func (f *Forwarder) roundTripUDP(s *server, u *udpSock, req []byte, probe bool) (r wire.UpstreamReply, truncated, clean bool, err error) {
	id := newID(req)
	mixed := randomizeCase(req)
	u.uses++
	s.countRequest(protoUDP, probe)
	bufp := f.bufs.get()
	lent := false // to the reply returned, which releases it
	defer func() {
		if !lent {
			f.bufs.put(bufp)
		}
	}()
	buf := *bufp
	clean = true
	miscased := false // a reply came, right but for its case
	for send := req; ; send = nil {
		n, err := u.exchange(send, buf)
		if err != nil {
			if miscased && s.cases.mismatchedOnly(f.now()) {
				f.log.Warn("upstream no longer echoes the query's case; replies in another case are taken until it is re-tested",
					"server", s.addr, "queries", caseStopQueries, "retest", caseRetest)
			}
			return wire.UpstreamReply{}, false, false, err
		}
		v := parseReply(buf[:n], id, req, &r)
		if v == replyOK && !s.cases.accept(caseEchoed(buf[:n], req), mixed, f.now()) {
			v, miscased = replySpoofed, true
		}
		switch v {
		case replyOK:
			lent = true
			return r.Lend(bufp, &f.bufs), false, clean, nil
		case replyTruncated, replyTruncatedWhole:
			return wire.UpstreamReply{}, true, false, nil
		case replySpoofed:
			s.countError(kindSpoofed)
		case replyMalformed:
			if n == len(buf) {
				// The kernel cut a datagram larger than the buffer;
				// the whole reply may come over TCP.
				return wire.UpstreamReply{}, true, false, nil
			}
			s.countError(kindMalformed)
		}
		// Whoever sent that may send more; the next owner must not read it.
		clean = false
	}
}
