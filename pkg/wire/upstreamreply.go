package wire

import (
	"bytes"
	"fmt"

	"github.com/miekg/dns"
)

// UpstreamReply is an upstream reply read once, by the forwarder that
// checked it, and handed on with what that read found: the cache stores it
// from the scan, or from the message already unpacked, without reading the
// bytes again.
type UpstreamReply struct {
	Raw     []byte   // the reply as received
	Scanned bool     // ScanUpstream took Raw: Scan is set, Msg is nil
	Scan    Upstream // aliases Raw
	Msg     *dns.Msg // Raw unpacked, when ScanUpstream did not take it

	// Raw's buffer when it is lent by a pool (Lend): Release gives it
	// back. nil: Raw is the reply's own, for the garbage collector.
	buf  *[]byte
	pool Recycler
}

// Recycler takes back the read buffers it lent to UpstreamReplies.
type Recycler interface {
	Recycle(buf *[]byte)
}

// Lend returns r, read into the pooled buffer buf, as the holder of that
// buffer until Release gives it back to pool: a reply on the miss path is
// read, checked, stored (PackUpstream copies it) and released, without a
// copy of its bytes made for the way between the forwarder and the cache.
func (r UpstreamReply) Lend(buf *[]byte, pool Recycler) UpstreamReply {
	r.buf, r.pool = buf, pool
	return r
}

// Release gives the buffer r was lent back to its pool, if any; neither r
// nor a copy of it (Raw, Scan.Name) may be read afterwards. Msg, which
// holds nothing of the bytes, stays valid. A reply never released is
// simply left to the garbage collector.
func (r *UpstreamReply) Release() {
	if r.pool != nil {
		r.pool.Recycle(r.buf)
	}
	*r = UpstreamReply{Msg: r.Msg}
}

// ReadUpstream reads raw once: in place when ScanUpstream takes it, else
// unpacked with miekg/dns. r aliases raw.
func ReadUpstream(raw []byte) (r UpstreamReply, err error) {
	r.Raw = raw
	if r.Scan, r.Scanned = ScanUpstream(raw); r.Scanned {
		return r, nil
	}
	r.Msg = new(dns.Msg)
	if err := r.Msg.Unpack(raw); err != nil {
		return UpstreamReply{}, fmt.Errorf("unpacking upstream reply: %w", err)
	}
	return r, nil
}

// Rcode returns the reply's rcode.
func (r *UpstreamReply) Rcode() int {
	if r.Scanned {
		return r.Scan.Rcode
	}
	return r.Msg.Rcode
}

// Clone returns r on a copy of its bytes, for a reply read from a reused
// buffer. Msg, which holds nothing of the bytes, is shared.
func (r UpstreamReply) Clone() UpstreamReply {
	raw := bytes.Clone(r.Raw)
	if r.Scanned {
		r.Scan.Name = raw[HeaderLen : HeaderLen+len(r.Scan.Name)]
	}
	r.Raw, r.buf, r.pool = raw, nil, nil
	return r
}
