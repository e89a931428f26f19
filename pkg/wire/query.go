package wire

import (
	"encoding/binary"
	"errors"
)

// Header bits of the second 16-bit word.
const (
	flagQR     = 1 << 15
	flagAA     = 1 << 10
	flagTC     = 1 << 9
	flagRD     = 1 << 8
	flagRA     = 1 << 7
	flagAD     = 1 << 5
	flagCD     = 1 << 4
	opcodeMask = 0xF << 11
	rcodeMask  = 0xF

	// HeaderLen is the size of a DNS message header.
	HeaderLen = 12
	// MaxNameLen is the longest name in wire form (RFC 1035 2.3.4).
	MaxNameLen = 255

	typeOPT = 41
)

// Errors from Parse. The server maps each to its answer in one place.
var (
	// ErrNoReply marks a packet that gets no answer at all: too short to hold
	// a header, or a response (QR set) that must not be reflected.
	ErrNoReply = errors.New("unparseable header or not a query")
	// ErrFormat marks a query whose header parsed but whose body is malformed:
	// not exactly one question, a bad name, a truncated record, two OPTs.
	ErrFormat = errors.New("malformed query")
	// ErrNotImp marks an opcode other than QUERY.
	ErrNotImp = errors.New("opcode not implemented")
	// ErrBadVers marks an EDNS version above 0.
	ErrBadVers = errors.New("unsupported EDNS version")
)

// Query is a request parsed in place. Name points into the packet that was
// parsed, so a Query is valid only while that buffer is. The zero value is an
// empty query; Parse fills every field.
type Query struct {
	ID    uint16
	Flags uint16 // the raw second header word
	// Name is the question name in wire form, in the client's case; it
	// aliases the packet.
	Name  []byte
	Type  uint16
	Class uint16

	// EDNS is true when the query carried an OPT record; UDPSize, Version
	// and DO are its fields (UDPSize is raised to 512 when smaller).
	EDNS    bool
	UDPSize uint16
	Version uint8
	DO      bool

	// QuestionEnd is the offset just past the question; zero when the
	// question could not be parsed.
	QuestionEnd int

	lowerLen int
	// lower is the lowercased name, then room for the key's type, class
	// and flag bytes that Hash appends to it: hashed in place, not copied.
	lower [MaxNameLen + keyTrailerLen]byte
}

// Opcode returns the query's opcode.
func (q *Query) Opcode() int { return int(q.Flags&opcodeMask) >> 11 }

// RD reports whether recursion was desired.
func (q *Query) RD() bool { return q.Flags&flagRD != 0 }

// CD reports whether checking is disabled.
func (q *Query) CD() bool { return q.Flags&flagCD != 0 }

// AD reports whether the client set the AD bit.
func (q *Query) AD() bool { return q.Flags&flagAD != 0 }

// LowerName returns the question name in wire form, lowercased. It aliases
// q and is valid until q is parsed again.
func (q *Query) LowerName() []byte { return q.lower[:q.lowerLen] }

// CopyTo makes dst the query q for pkt, a copy of the packet q was parsed
// from: the slow path keeps its own copy of a packet, and takes the parsed
// query with it rather than parsing the copy again. dst.Name aliases pkt.
func (q *Query) CopyTo(dst *Query, pkt []byte) {
	*dst = *q
	if q.Name != nil {
		dst.Name = pkt[HeaderLen : HeaderLen+len(q.Name)]
	}
}

// reset clears every field but ID (Parse overwrites it once the header
// is there) and the lower buffer, of which only the first lowerLen bytes
// are read: clearing its 260 bytes for every query is what *q = Query{}
// would cost. TestResetClearsEveryField keeps it complete.
func (q *Query) reset() {
	q.Flags, q.Name, q.Type, q.Class = 0, nil, 0, 0
	q.EDNS, q.UDPSize, q.Version, q.DO = false, 0, 0, false
	q.QuestionEnd, q.lowerLen = 0, 0
}

// Parse reads the header, the question and any OPT record of pkt into q. It
// does not allocate. On ErrFormat, ErrNotImp and ErrBadVers, q holds what was
// read (ID, Flags, and the question and EDNS fields when they parsed), enough
// for the server to build its error reply.
func Parse(pkt []byte, q *Query) error {
	q.reset()
	if len(pkt) < HeaderLen {
		return ErrNoReply
	}
	q.ID = binary.BigEndian.Uint16(pkt)
	q.Flags = binary.BigEndian.Uint16(pkt[2:])
	if q.Flags&flagQR != 0 {
		return ErrNoReply
	}
	qd := binary.BigEndian.Uint16(pkt[4:])
	an := binary.BigEndian.Uint16(pkt[6:])
	ns := binary.BigEndian.Uint16(pkt[8:])
	ar := binary.BigEndian.Uint16(pkt[10:])

	if qd != 1 {
		if q.Opcode() != 0 {
			return ErrNotImp
		}
		return ErrFormat
	}
	off, err := q.parseQuestion(pkt)
	if err != nil {
		return err
	}
	if q.Opcode() != 0 {
		return ErrNotImp
	}
	// A query carries no answer or authority records; skip them if present
	// (UPDATE-like oddities are already refused above) and find the OPT,
	// which belongs in the additional section only (RFC 6891 6.1.1).
	for i := 0; i < int(an)+int(ns); i++ {
		var typ uint16
		if off, typ, err = skipRR(pkt, off); err != nil {
			return err
		}
		if typ == typeOPT {
			return ErrFormat
		}
	}
	for i := 0; i < int(ar); i++ {
		if off, err = q.parseAdditional(pkt, off); err != nil {
			return err
		}
	}
	if q.EDNS && q.Version > 0 {
		return ErrBadVers
	}
	return nil
}

func (q *Query) parseQuestion(pkt []byte) (int, error) {
	off := HeaderLen
	start := off
	for { // the labels' lengths first; the name is lowercased in one go below
		if off >= len(pkt) {
			return 0, ErrFormat
		}
		l := int(pkt[off])
		if l&0xC0 != 0 { // no compression in a question: nothing precedes it
			return 0, ErrFormat
		}
		off += 1 + l
		if off > len(pkt) || off-start > MaxNameLen {
			return 0, ErrFormat
		}
		if l == 0 {
			break
		}
	}
	if off+4 > len(pkt) {
		return 0, ErrFormat
	}
	q.Name = pkt[start:off]
	q.lowerLen = lowerInto(q.lower[:], q.Name)
	q.Type = binary.BigEndian.Uint16(pkt[off:])
	q.Class = binary.BigEndian.Uint16(pkt[off+2:])
	off += 4
	q.QuestionEnd = off
	return off, nil
}

// LowerName returns the wire-form name with ASCII letters lowercased, as
// a Key's name is; a name longer than MaxNameLen is cut there.
func LowerName(name []byte) string {
	var b [MaxNameLen]byte
	n := lowerInto(b[:], name[:min(len(name), MaxNameLen)])
	return string(b[:n])
}

// lowerInto writes name with ASCII letters lowercased to dst, which is at
// least as long, and returns len(name). Label length bytes (below 64) are
// not letters and pass unchanged, so a wire-form name is lowercased whole,
// eight bytes at a time.
func lowerInto(dst, name []byte) int {
	n := len(name)
	dst = dst[:n]
	i := 0
	for ; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], lower8(binary.LittleEndian.Uint64(name[i:])))
	}
	for ; i < n; i++ {
		dst[i] = lowerTable[name[i]]
	}
	return n
}

// lower8 lowercases the ASCII letters among the eight bytes of x: for each
// byte, bit 7 of (b&0x7f)+(0x80-'A') says b&0x7f >= 'A', of
// (b&0x7f)+(0x80-'Z'-1) that it is above 'Z'; a byte with bit 7 set is no
// ASCII letter. No carry crosses bytes, as each sum stays below 0x100.
func lower8(x uint64) uint64 {
	const ones = 0x0101010101010101
	h := x & (0x7f * ones)
	upper := (h + (0x80-'A')*ones) &^ (h + (0x80-'Z'-1)*ones) &^ x & (0x80 * ones)
	return x | upper>>2
}

func (q *Query) parseAdditional(pkt []byte, off int) (int, error) {
	nameStart := off
	off, err := skipName(pkt, off)
	if err != nil {
		return 0, err
	}
	if off+10 > len(pkt) {
		return 0, ErrFormat
	}
	typ := binary.BigEndian.Uint16(pkt[off:])
	rdlen := int(binary.BigEndian.Uint16(pkt[off+8:]))
	if off+10+rdlen > len(pkt) {
		return 0, ErrFormat
	}
	if typ == typeOPT {
		// RFC 6891 6.1.1: one OPT, owned by the root.
		if q.EDNS || off != nameStart+1 || pkt[nameStart] != 0 {
			return 0, ErrFormat
		}
		if !wellFormedOptions(pkt[off+10 : off+10+rdlen]) {
			return 0, ErrFormat
		}
		q.EDNS = true
		q.UDPSize = max(binary.BigEndian.Uint16(pkt[off+2:]), 512)
		q.Version = pkt[off+5]
		q.DO = pkt[off+6]&0x80 != 0
	}
	return off + 10 + rdlen, nil
}

// skipName returns the offset past the (possibly compressed) name at off.
func skipName(pkt []byte, off int) (int, error) {
	for n := 0; ; n++ {
		if off >= len(pkt) || n > 127 {
			return 0, ErrFormat
		}
		l := int(pkt[off])
		switch l & 0xC0 {
		case 0x00:
			if l == 0 {
				return off + 1, nil
			}
			off += 1 + l
		case 0xC0:
			if off+2 > len(pkt) {
				return 0, ErrFormat
			}
			return off + 2, nil
		default: // 0x40 and 0x80 label types are obsolete (RFC 6891)
			return 0, ErrFormat
		}
	}
}

// wellFormedOptions reports whether an OPT record's RDATA is a whole
// number of options (RFC 6891 6.1.2: code, length, data), each inside it:
// an RDLENGTH that cuts an option or leaves bytes over is malformed.
func wellFormedOptions(rdata []byte) bool {
	for len(rdata) > 0 {
		if len(rdata) < 4 {
			return false
		}
		n := 4 + int(binary.BigEndian.Uint16(rdata[2:]))
		if n > len(rdata) {
			return false
		}
		rdata = rdata[n:]
	}
	return true
}

// skipRR returns the offset past the resource record at off, and its type.
func skipRR(pkt []byte, off int) (int, uint16, error) {
	off, err := skipName(pkt, off)
	if err != nil {
		return 0, 0, err
	}
	if off+10 > len(pkt) {
		return 0, 0, ErrFormat
	}
	typ := binary.BigEndian.Uint16(pkt[off:])
	rdlen := int(binary.BigEndian.Uint16(pkt[off+8:]))
	if off+10+rdlen > len(pkt) {
		return 0, 0, ErrFormat
	}
	return off + 10 + rdlen, typ, nil
}
