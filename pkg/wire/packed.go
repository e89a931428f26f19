package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/miekg/dns"
)

// DefaultUDPSize is the EDNS buffer size nodecache advertises and the largest
// UDP reply it sends (the DNS Flag Day 2020 value, which avoids fragmentation).
const DefaultUDPSize = 1232

// Packed is a reply kept in wire form: ID zero, the question lowercased, no
// OPT record, and the offsets of every TTL field. It is immutable once built
// and safe for concurrent use; AppendReply writes a copy fitted to one query.
//
// A Packed is the head of its bytes: the reply, then its TTL offsets, follow
// it in the same allocation, and a *Packed is the one handle to them. So a
// holder that keeps a *Packed reads the reply with no second pointer to
// follow, and a Packed is never copied (go vet's copylocks check reports a
// copy): use the *Packed that Pack, PackOwned or PackUpstream return. The
// zero Packed is not a reply.
//
// The allocation is pointer-free, so the collector never scans it, and may
// keep room in front of the Packed for its holder's own pointer-free fields
// (the room argument of PackOwned and PackUpstream): a cache entry is its
// fields, the Packed and the reply in one allocation (pkg/cache,
// TestEntrySize), one cache miss from the LRU rather than two.
type Packed struct {
	_ noCopy
	// size is the bytes of the allocation p is in (the holder's room, p,
	// the reply, the TTL offsets): the allocator's size class, so that
	// BufSize is what it really costs.
	size    uint32
	minTTL  uint32
	msgLen  uint16 // length of the reply; at most dns.MaxMsgSize
	qEnd    uint16 // offset just past the question
	records uint16 // TTL offsets after the reply
	room    uint16 // bytes in front of p in its allocation, for its holder
	// The reply (msgLen bytes) follows, then each record's TTL field
	// offset in it as a big-endian uint16 (OPT excluded), records of them.
	// Never modified after it is packed.
}

// noCopy makes go vet's copylocks check report a copied Packed: the copy
// would lose the bytes that follow the original.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// packedLen is the size of a Packed: its bytes start this far after it.
const packedLen = int(unsafe.Sizeof(Packed{}))

// buf is the reply and its TTL offsets.
func (p *Packed) buf() []byte {
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(p), packedLen)), int(p.msgLen)+2*int(p.records))
}

// newBlock allocates a Packed with room bytes in front of it (a multiple
// of 8) and n bytes after it, and returns it with its body: empty, with
// capacity for the n bytes. The allocation is made of uint64s, so it is
// pointer-free and 8-byte aligned (a holder's fields in the room are
// aligned for any field type), and as large as its size class.
func newBlock(room, n int) (*Packed, []byte) {
	if room < 0 || room%8 != 0 || room > math.MaxUint16 {
		panic(fmt.Sprintf("wire: room of %d bytes before a Packed, want a multiple of 8", room))
	}
	// slices.Grow rounds the capacity up to the allocator's size class.
	words := slices.Grow([]uint64(nil), (room+packedLen+n+7)/8)
	words = words[:cap(words)]
	block := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), 8*len(words))
	p := (*Packed)(unsafe.Pointer(&block[room]))
	p.size, p.room = uint32(len(block)), uint16(room)
	return p, block[room+packedLen : room+packedLen]
}

// Pack turns m into a Packed reply. m is not modified. The question name is
// lowercased and every owner name equal to it (in any case) is written as a
// compression pointer to the question, so that AppendReply can give the
// client's own case back by patching the question alone.
func Pack(m *dns.Msg) (*Packed, error) {
	if len(m.Question) != 1 {
		return nil, fmt.Errorf("packing reply: %d questions, want 1", len(m.Question))
	}
	return PackOwned(m.Copy(), 0)
}

// PackOwned is Pack for a message the caller owns and will not use again: it
// rewrites c in place (ID, names, OPT removed) instead of copying it first,
// saving a deep copy on the miss path. room bytes (a multiple of 8) are
// left free in front of the Packed for a holder's own fields (see Packed).
func PackOwned(c *dns.Msg, room int) (*Packed, error) {
	if len(c.Question) != 1 {
		return nil, fmt.Errorf("packing reply: %d questions, want 1", len(c.Question))
	}
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
	msg, err := c.Pack()
	if err != nil {
		return nil, fmt.Errorf("packing reply for %s: %w", qname, err)
	}
	return newPacked(msg, room)
}

// newPacked indexes the TTL fields of an already packed reply (with no OPT
// record, so that every record has a TTL to rewrite) and copies it, with
// the offsets, after a new Packed. msg itself is not kept: dns.Msg.Pack
// sizes its buffer for the uncompressed message, larger than the reply.
func newPacked(msg []byte, room int) (*Packed, error) {
	var q Query
	// The packed reply has QR set; parse its question by hand.
	if len(msg) < HeaderLen {
		return nil, ErrFormat
	}
	if len(msg) > dns.MaxMsgSize {
		return nil, fmt.Errorf("indexing packed reply: %d bytes, more than %d", len(msg), dns.MaxMsgSize)
	}
	qEnd, err := q.parseQuestion(msg)
	if err != nil {
		return nil, fmt.Errorf("indexing packed reply: %w", err)
	}
	n := int(binary.BigEndian.Uint16(msg[6:])) + int(binary.BigEndian.Uint16(msg[8:])) + int(binary.BigEndian.Uint16(msg[10:]))
	p, body := newBlock(room, len(msg)+2*n)
	if err := p.indexTTLs(append(body, msg...), qEnd, n, 0); err != nil {
		return nil, fmt.Errorf("indexing packed reply: %w", err)
	}
	return p, nil
}

// indexTTLs fills in p for its body, which holds a reply (question ending
// at qEnd, then n records, no OPT) and room after it, within its capacity,
// for the TTL offsets it appends. With maxTTL > 0 it lowers every TTL above
// maxTTL to it, in place.
func (p *Packed) indexTTLs(body []byte, qEnd, n int, maxTTL uint32) error {
	msgLen := len(body)
	minTTL := ^uint32(0)
	off := qEnd
	for range n {
		var err error
		if off, err = skipName(body[:msgLen], off); err != nil {
			return err
		}
		if off+10 > msgLen {
			return ErrFormat
		}
		ttl := binary.BigEndian.Uint32(body[off+4:])
		if maxTTL > 0 && ttl > maxTTL {
			ttl = maxTTL
			binary.BigEndian.PutUint32(body[off+4:], ttl)
		}
		minTTL = min(minTTL, ttl)
		body = binary.BigEndian.AppendUint16(body, uint16(off+4)) // within capacity: never moved
		off += 10 + int(binary.BigEndian.Uint16(body[off+8:]))
	}
	if n == 0 {
		minTTL = 0
	}
	p.minTTL, p.msgLen, p.qEnd, p.records = minTTL, uint16(msgLen), uint16(qEnd), uint16(n)
	return nil
}

// Rcode returns the reply's rcode (the 4-bit header part: a stored reply
// has no OPT record to extend it).
func (p *Packed) Rcode() int { return int(p.buf()[3] & rcodeMask) }

// Len returns the size of the stored reply in bytes.
func (p *Packed) Len() int { return int(p.msgLen) }

// BufSize is the heap memory p's allocation takes (the holder's room, p,
// the reply and its TTL offsets), for byte-bounded caches.
func (p *Packed) BufSize() int { return int(p.size) }

// Room is the bytes kept free in front of p for its holder (the room
// PackOwned or PackUpstream was given).
func (p *Packed) Room() int { return int(p.room) }

// MinTTL returns the smallest TTL in the reply (0 when it has no records).
func (p *Packed) MinTTL() uint32 { return p.minTTL }

// Records returns the number of resource records in the reply.
func (p *Packed) Records() int { return int(p.records) }

// ttlOffs returns the TTL field offsets, two bytes each.
func (p *Packed) ttlOffs() []byte { return p.buf()[p.msgLen:] }

// Question returns the reply's question: its name in wire form, lowercased,
// and its type and class. name aliases p and must not be modified. A cache
// keys its entries by it rather than keeping a second copy of the name.
func (p *Packed) Question() (name []byte, typ, class uint16) {
	t, b := int(p.qEnd)-4, p.buf()
	return b[HeaderLen:t:t], binary.BigEndian.Uint16(b[t:]), binary.BigEndian.Uint16(b[t+2:])
}

// Wire returns the stored reply in wire form: the question name lowercased,
// TTLs as stored. It aliases p and must not be modified.
func (p *Packed) Wire() []byte { return p.buf()[:p.msgLen:p.msgLen] }

// Msg unpacks the stored reply, for the slow paths (CLI dumps, tests).
func (p *Packed) Msg() (*dns.Msg, error) {
	m := new(dns.Msg)
	if err := m.Unpack(p.Wire()); err != nil {
		return nil, fmt.Errorf("unpacking stored reply: %w", err)
	}
	return m, nil
}

// TTLMode says how AppendReply rewrites the stored reply: its TTLs, and
// the order of its address records.
type TTLMode struct {
	// Elapsed is subtracted from every TTL (floored at 0).
	Elapsed uint32
	// Fixed, when non-zero, replaces every TTL (serve-stale answers).
	Fixed uint32
	// Shuffle puts the A and AAAA records of each RRset of a NOERROR reply
	// in a fresh random order (shuffle.go), as CoreDNS's loadbalance does.
	// The server edge sets it; the cache and the zone leave it false.
	Shuffle bool
}

// AppendReply appends to dst the reply for q: the stored bytes with q's ID,
// flags fitted to q (RD and CD echoed, AD always clear: nodecache validates
// nothing, and an upstream's AD crossed an unauthenticated hop; see
// docs/hardening.md), q's own spelling of the name, TTLs rewritten (and
// address records shuffled) per mode, an
// OPT record when q had one, and truncation (TC, the whole records that fit)
// when the result is larger than maxSize. It does not allocate when dst has
// room.
func (p *Packed) AppendReply(dst []byte, q *Query, mode TTLMode, maxSize int) []byte {
	start := len(dst)
	dst = append(dst, p.Wire()...)
	out := dst[start:]
	binary.BigEndian.PutUint16(out, q.ID)
	flags := binary.BigEndian.Uint16(out[2:])
	flags = flagQR | flags&(flagAA|flagTC|rcodeMask) | flagRA | q.Flags&(flagRD|flagCD)
	binary.BigEndian.PutUint16(out[2:], flags)
	if len(q.Name) == int(p.qEnd)-4-HeaderLen {
		copy(out[HeaderLen:], q.Name)
	}
	offs := p.ttlOffs()
	for i := 0; i+1 < len(offs); i += 2 {
		o := binary.BigEndian.Uint16(offs[i:])
		ttl := mode.Fixed
		if ttl == 0 {
			ttl = binary.BigEndian.Uint32(out[o:])
			ttl -= min(ttl, mode.Elapsed)
		}
		binary.BigEndian.PutUint32(out[o:], ttl)
	}
	if mode.Shuffle {
		shuffleAddrs(out, int(p.qEnd), offs)
	}
	if q.EDNS {
		dst = appendOPT(dst, start, q.DO, 0)
	}
	if len(dst)-start > maxSize {
		dst = p.truncate(dst, start, q, maxSize)
	}
	return dst
}

// optLen is the size of the OPT record appendOPT writes.
const optLen = 11

// truncate cuts the reply at start down to the records that fit maxSize
// with the OPT record q needs, sets TC and re-adds the OPT record. The kept
// records are a prefix of the stored ones, answer, authority and additional
// in that order, as dns.Msg.Truncate keeps them (and so CoreDNS): a client
// that ignores TC, such as musl before 1.2.4, still gets what fits rather
// than nothing. Compression pointers only point backwards, so a prefix is
// a well-formed message.
func (p *Packed) truncate(dst []byte, start int, q *Query, maxSize int) []byte {
	budget := maxSize
	if q.EDNS {
		budget -= optLen
	}
	out := dst[start:]
	end, kept := int(p.qEnd), 0
	offs := p.ttlOffs()
	for i := 0; i+1 < len(offs); i += 2 {
		// The TTL field is followed by RDLENGTH and the data.
		o := int(binary.BigEndian.Uint16(offs[i:]))
		recEnd := o + 6 + int(binary.BigEndian.Uint16(out[o+4:]))
		if recEnd > budget {
			break
		}
		end, kept = recEnd, kept+1
	}
	dst = dst[:start+end]
	out = dst[start:]
	out[2] |= flagTC >> 8
	for _, c := range []int{6, 8, 10} { // ANCOUNT, NSCOUNT, ARCOUNT
		n := min(int(binary.BigEndian.Uint16(out[c:])), kept)
		binary.BigEndian.PutUint16(out[c:], uint16(n))
		kept -= n
	}
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
