package wire

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/miekg/dns"
)

// DefaultUDPSize is the EDNS buffer size nodecache advertises and the largest
// UDP reply it sends (the DNS Flag Day 2020 value, which avoids fragmentation).
const DefaultUDPSize = 1232

// Packed is a reply kept in wire form: ID zero, the question lowercased, no
// OPT record, and the offsets of every TTL field. It is immutable once built
// and safe for concurrent use; AppendReply writes a copy fitted to one query.
type Packed struct {
	buf     []byte   // the whole reply; never modified after Pack
	ttlOffs []uint16 // offsets of each RR's TTL field in buf (OPT excluded)
	qEnd    int      // offset just past the question
	rcode   int
	minTTL  uint32
}

// Pack turns m into a Packed reply. m is not modified. The question name is
// lowercased and every owner name equal to it (in any case) is written as a
// compression pointer to the question, so that AppendReply can give the
// client's own case back by patching the question alone.
func Pack(m *dns.Msg) (*Packed, error) {
	if len(m.Question) != 1 {
		return nil, fmt.Errorf("packing reply: %d questions, want 1", len(m.Question))
	}
	return PackOwned(m.Copy())
}

// PackOwned is Pack for a message the caller owns and will not use again: it
// rewrites c in place (ID, names, OPT removed) instead of copying it first,
// saving a deep copy on the miss path.
func PackOwned(c *dns.Msg) (*Packed, error) {
	if len(c.Question) != 1 {
		return nil, fmt.Errorf("packing reply: %d questions, want 1", len(c.Question))
	}
	rcode := c.Rcode
	c.Id = 0
	c.Compress = true
	qname := strings.ToLower(c.Question[0].Name)
	c.Question[0].Name = qname
	lowerOwners := func(rrs []dns.RR) {
		for _, rr := range rrs {
			if h := rr.Header(); strings.EqualFold(h.Name, qname) {
				h.Name = qname
			}
		}
	}
	lowerOwners(c.Answer)
	lowerOwners(c.Ns)
	extra := c.Extra[:0]
	for _, rr := range c.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	c.Extra = extra
	lowerOwners(c.Extra)
	buf, err := c.Pack()
	if err != nil {
		return nil, fmt.Errorf("packing reply for %s: %w", qname, err)
	}
	return newPacked(buf, rcode)
}

// newPacked indexes the TTL fields of an already packed reply.
func newPacked(buf []byte, rcode int) (*Packed, error) {
	var q Query
	// The packed reply has QR set; parse its question by hand.
	if len(buf) < HeaderLen {
		return nil, ErrFormat
	}
	qEnd, err := q.parseQuestion(buf)
	if err != nil {
		return nil, fmt.Errorf("indexing packed reply: %w", err)
	}
	p := &Packed{buf: buf, qEnd: qEnd, rcode: rcode, minTTL: ^uint32(0)}
	n := int(binary.BigEndian.Uint16(buf[6:])) + int(binary.BigEndian.Uint16(buf[8:])) + int(binary.BigEndian.Uint16(buf[10:]))
	p.ttlOffs = make([]uint16, 0, n)
	off := qEnd
	for i := 0; i < n; i++ {
		if off, err = skipName(buf, off); err != nil {
			return nil, fmt.Errorf("indexing packed reply: %w", err)
		}
		if off+10 > len(buf) {
			return nil, ErrFormat
		}
		p.ttlOffs = append(p.ttlOffs, uint16(off+4))
		p.minTTL = min(p.minTTL, binary.BigEndian.Uint32(buf[off+4:]))
		off += 10 + int(binary.BigEndian.Uint16(buf[off+8:]))
	}
	if n == 0 {
		p.minTTL = 0
	}
	return p, nil
}

// Rcode returns the reply's rcode (the 4-bit header part).
func (p *Packed) Rcode() int { return p.rcode }

// Len returns the size of the stored reply in bytes.
func (p *Packed) Len() int { return len(p.buf) }

// Size estimates the memory the Packed holds, for byte-bounded caches.
func (p *Packed) Size() int { return 64 + cap(p.buf) + 2*cap(p.ttlOffs) }

// MinTTL returns the smallest TTL in the reply (0 when it has no records).
func (p *Packed) MinTTL() uint32 { return p.minTTL }

// Records returns the number of resource records in the reply.
func (p *Packed) Records() int { return len(p.ttlOffs) }

// Msg unpacks the stored reply, for the slow paths (CLI dumps, tests).
func (p *Packed) Msg() (*dns.Msg, error) {
	m := new(dns.Msg)
	if err := m.Unpack(p.buf); err != nil {
		return nil, fmt.Errorf("unpacking stored reply: %w", err)
	}
	return m, nil
}

// TTLMode says how AppendReply rewrites TTLs.
type TTLMode struct {
	// Elapsed is subtracted from every TTL (floored at 0).
	Elapsed uint32
	// Fixed, when non-zero, replaces every TTL (serve-stale answers).
	Fixed uint32
}

// AppendReply appends to dst the reply for q: the stored bytes with q's ID,
// flags fitted to q (RD and CD echoed, AD only when the client asked for it
// with AD or DO), q's own spelling of the name, TTLs rewritten per mode, an
// OPT record when q had one, and truncation (TC, empty sections) when the
// result is larger than maxSize. It does not allocate when dst has room.
func (p *Packed) AppendReply(dst []byte, q *Query, mode TTLMode, maxSize int) []byte {
	start := len(dst)
	dst = append(dst, p.buf...)
	out := dst[start:]
	binary.BigEndian.PutUint16(out, q.ID)
	flags := binary.BigEndian.Uint16(out[2:])
	flags = flagQR | flags&(flagAA|flagTC|flagAD|rcodeMask) | flagRA | q.Flags&(flagRD|flagCD)
	if !q.AD() && !q.DO {
		flags &^= flagAD
	}
	binary.BigEndian.PutUint16(out[2:], flags)
	if len(q.Name) == p.qEnd-4-HeaderLen {
		copy(out[HeaderLen:], q.Name)
	}
	for _, o := range p.ttlOffs {
		ttl := mode.Fixed
		if ttl == 0 {
			ttl = binary.BigEndian.Uint32(out[o:])
			ttl -= min(ttl, mode.Elapsed)
		}
		binary.BigEndian.PutUint32(out[o:], ttl)
	}
	if q.EDNS {
		dst = appendOPT(dst, start, q.DO, 0)
	}
	if len(dst)-start > maxSize {
		dst = truncate(dst, start, p.qEnd, q)
	}
	return dst
}

// truncate cuts the reply at start down to header and question, sets TC and
// re-adds the OPT record.
func truncate(dst []byte, start, qEnd int, q *Query) []byte {
	dst = dst[:start+qEnd]
	out := dst[start:]
	out[2] |= flagTC >> 8
	clear(out[6:12])
	if q.EDNS {
		dst = appendOPT(dst, start, q.DO, 0)
	}
	return dst
}

// appendOPT appends an OPT record advertising DefaultUDPSize with the given
// extended rcode (the upper 8 bits of a 12-bit rcode) and bumps ARCOUNT of
// the message at start.
func appendOPT(dst []byte, start int, do bool, extRcode uint8) []byte {
	var doBit byte
	if do {
		doBit = 0x80
	}
	dst = append(dst,
		0,          // root owner
		0, typeOPT, // type
		DefaultUDPSize>>8, DefaultUDPSize&0xFF, // class: UDP payload size
		extRcode, 0, doBit, 0, // TTL: ext rcode, version 0, DO, Z
		0, 0, // RDLENGTH
	)
	ar := binary.BigEndian.Uint16(dst[start+10:])
	binary.BigEndian.PutUint16(dst[start+10:], ar+1)
	return dst
}

// AppendError appends a reply to q carrying rcode and no records: the header,
// the question when it parsed, and an OPT record when the query had one.
// Extended rcodes (BADVERS) go into the OPT record; the query is then always
// answered with one, as RFC 6891 requires.
func AppendError(dst []byte, pkt []byte, q *Query, rcode int) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	out := dst[start:]
	binary.BigEndian.PutUint16(out, q.ID)
	flags := flagQR | flagRA | q.Flags&(opcodeMask|flagRD|flagCD) | uint16(rcode&rcodeMask)
	binary.BigEndian.PutUint16(out[2:], flags)
	if q.QuestionEnd > 0 {
		out[5] = 1
		dst = append(dst, pkt[HeaderLen:q.QuestionEnd]...)
	}
	if q.EDNS || rcode > rcodeMask {
		dst = appendOPT(dst, start, q.DO, uint8(rcode>>4))
	}
	return dst
}
