package wire

import (
	"encoding/binary"
)

// Record types whose rdata ScanUpstream checks.
const (
	typeA     = 1
	typeNS    = 2
	typeCNAME = 5
	typeSOA   = 6
	typePTR   = 12
	typeMX    = 15
	typeTXT   = 16
	typeAAAA  = 28
	typeSRV   = 33
)

// Upstream is an upstream reply read in place by ScanUpstream: what the
// cache policy needs to decide on it, and where PackUpstream finds its
// parts. Name aliases the scanned message.
type Upstream struct {
	Rcode int    // the header's; a reply with an extended rcode is not scanned
	Name  []byte // the question name in wire form, as the upstream wrote it
	Type  uint16
	Class uint16

	Answers      int    // ANCOUNT
	AnswerMinTTL uint32 // smallest TTL in the answer section; 0 when empty
	// SOA is set when the authority section holds an SOA; SOATTL and
	// SOAMinimum are those of the first one (RFC 2308 5).
	SOA        bool
	SOATTL     uint32
	SOAMinimum uint32

	qEnd    int // offset just past the question
	records int // records other than OPT
	end     int // offset of the OPT record, or len(msg) when there is none
}

// ScanUpstream reads an upstream reply without unpacking it, for the
// cache's miss path. It takes only the plain shape nearly every reply has,
// and checks all of it: one question, no TC, no extended rcode, records
// of the types A, AAAA, CNAME, NS, PTR, MX, SRV, SOA and TXT with rdata
// that fits its type exactly, names whose compression pointers point to
// the start of a label seen before (see checkName), at most one OPT (the
// last record), nothing after the last
// record, and every owner name equal to the question written as a pointer
// to it (so that AppendReply gives it the client's case). For anything
// else ok is false, and the caller unpacks the reply with miekg/dns, which
// handles it or rejects it as before.
//
// A reply ScanUpstream takes is one dns.Msg.Unpack takes too, and
// PackUpstream makes of it what PackOwned makes of the unpacked message
// (FuzzScanUpstream checks both).
func ScanUpstream(msg []byte) (u Upstream, ok bool) {
	if len(msg) < HeaderLen || len(msg) > maxScanLen {
		return u, false
	}
	var starts labelStarts
	flags := binary.BigEndian.Uint16(msg[2:])
	if flags&flagQR == 0 || flags&flagTC != 0 || binary.BigEndian.Uint16(msg[4:]) != 1 {
		return u, false
	}
	u.Rcode = int(flags & rcodeMask)
	an := int(binary.BigEndian.Uint16(msg[6:]))
	ns := int(binary.BigEndian.Uint16(msg[8:]))
	ar := int(binary.BigEndian.Uint16(msg[10:]))
	// No label is marked yet, so a pointer in the question fails the check.
	off, good := checkName(msg, HeaderLen, &starts)
	if !good || off+4 > len(msg) {
		return u, false
	}
	u.Name = msg[HeaderLen:off]
	u.Type = binary.BigEndian.Uint16(msg[off:])
	u.Class = binary.BigEndian.Uint16(msg[off+2:])
	off += 4
	u.qEnd = off
	u.Answers = an
	u.end = len(msg)
	for i := 0; i < an+ns+ar; i++ {
		start := off
		if off, good = checkName(msg, off, &starts); !good || off+10 > len(msg) {
			return u, false
		}
		typ := binary.BigEndian.Uint16(msg[off:])
		ttl := binary.BigEndian.Uint32(msg[off+4:])
		rd := off + 10
		rdEnd := rd + int(binary.BigEndian.Uint16(msg[off+8:]))
		if rdEnd > len(msg) {
			return u, false
		}
		off = rdEnd
		if typ == typeOPT {
			// The last record, owned by the root, and no extended rcode
			// (it would be lost with the OPT record).
			if i < an+ns || i != an+ns+ar-1 || rd != start+11 || msg[start] != 0 || msg[rd-6] != 0 {
				return u, false
			}
			u.end = start
			continue
		}
		if !checkRdata(msg, typ, rd, rdEnd, &starts) || !pointsToQuestion(msg, start) && equalsQuestion(msg, start, u.Name) {
			return u, false
		}
		u.records++
		switch {
		case i < an:
			if i == 0 || ttl < u.AnswerMinTTL {
				u.AnswerMinTTL = ttl
			}
		case i < an+ns && typ == typeSOA && !u.SOA:
			u.SOA, u.SOATTL = true, ttl
			u.SOAMinimum = binary.BigEndian.Uint32(msg[rdEnd-4:])
		}
	}
	return u, off == len(msg)
}

// maxScanLen is the largest reply ScanUpstream takes, so that its record
// of label starts fits on the stack: the largest UDP reply the forwarder
// reads. Larger ones (over TCP) are unpacked.
const maxScanLen = 4096

// labelStarts marks the offsets where labels of names already checked
// begin: the only places a compression pointer may point to.
type labelStarts [maxScanLen / 8]byte

func (s *labelStarts) set(off int)      { s[off>>3] |= 1 << (off & 7) }
func (s *labelStarts) has(off int) bool { return s[off>>3]&(1<<(off&7)) != 0 }

// checkName returns the offset past the name at off, after checking all
// of it: label types, the 255-byte limit, and compression pointers, which
// must point to the start of a label of a name checked before. miekg/dns
// takes any pointer that points backwards; ScanUpstream is stricter,
// because a stored reply is patched in place: a "name" read from the
// bytes of a TTL field would change when the TTL is rewritten. The name's
// own labels are then marked in starts.
func checkName(msg []byte, off int, starts *labelStarts) (int, bool) {
	start := off
	end := -1 // past the name where it starts, once a pointer is followed
	total := 0
	for {
		if off >= len(msg) {
			return 0, false
		}
		l := int(msg[off])
		switch l & 0xC0 {
		case 0x00:
			total += 1 + l
			if total > MaxNameLen || off+1+l > len(msg) {
				return 0, false
			}
			if l == 0 {
				if end < 0 {
					end = off + 1
				}
				markLabels(msg, start, starts)
				return end, true
			}
			off += 1 + l
		case 0xC0:
			if off+2 > len(msg) {
				return 0, false
			}
			ptr := int(binary.BigEndian.Uint16(msg[off:]) & 0x3FFF)
			if ptr >= len(msg) || !starts.has(ptr) {
				return 0, false
			}
			if end < 0 {
				end = off + 2
			}
			off = ptr
		default:
			return 0, false
		}
	}
}

// markLabels marks in starts the labels the checked name at off spells
// out, up to its root or its first pointer.
func markLabels(msg []byte, off int, starts *labelStarts) {
	for {
		l := int(msg[off])
		if l&0xC0 != 0 {
			return
		}
		starts.set(off)
		if l == 0 {
			return
		}
		off += 1 + l
	}
}

// checkRdata reports whether msg[rd:end] is well-formed rdata of type typ,
// one of the types ScanUpstream takes.
func checkRdata(msg []byte, typ uint16, rd, end int, starts *labelStarts) bool {
	nameAt := func(off int) int { // the offset past a name, or -1
		if off >= end {
			return -1
		}
		n, ok := checkName(msg, off, starts)
		if !ok {
			return -1
		}
		return n
	}
	switch typ {
	case typeA:
		return end-rd == 4
	case typeAAAA:
		return end-rd == 16
	case typeCNAME, typeNS, typePTR:
		return nameAt(rd) == end
	case typeMX:
		return nameAt(rd+2) == end
	case typeSRV:
		return nameAt(rd+6) == end
	case typeSOA:
		n := nameAt(rd)
		return n > 0 && nameAt(n)+20 == end
	case typeTXT:
		if rd == end {
			return false
		}
		for rd < end {
			rd += 1 + int(msg[rd])
		}
		return rd == end
	}
	return false
}

// pointsToQuestion reports whether the name at off is a pointer to the
// question name.
func pointsToQuestion(msg []byte, off int) bool {
	return off+1 < len(msg) && msg[off] == 0xC0 && msg[off+1] == HeaderLen
}

// equalsQuestion reports whether the (checked) name at off is the question
// name q, ignoring ASCII case.
func equalsQuestion(msg []byte, off int, q []byte) bool {
	i := 0
	for {
		l := int(msg[off])
		if l&0xC0 == 0xC0 {
			off = int(binary.BigEndian.Uint16(msg[off:]) & 0x3FFF)
			continue
		}
		if i+1+l > len(q) || q[i] != byte(l) || !equalFold(msg[off+1:off+1+l], q[i+1:i+1+l]) {
			return false
		}
		if l == 0 {
			return true
		}
		i += 1 + l
		off += 1 + l
	}
}

func equalFold(a, b []byte) bool {
	for i := range a {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

// lowerTable maps every byte to its ASCII lowercase: a load per byte of a
// name rather than two compares.
var lowerTable = func() (t [256]byte) {
	for i := range t {
		t[i] = lower(byte(i))
	}
	return t
}()

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// QuestionIs reports whether u's question is name (wire form, lowercase),
// typ and class, ignoring the case the upstream wrote it in.
func (u *Upstream) QuestionIs(name string, typ, class uint16) bool {
	return sameQuestion(u, name, typ, class)
}

// AnswersQuery reports whether u's question is the one at the start of the
// packed query req (name, type and class), ignoring case.
func (u *Upstream) AnswersQuery(req []byte) bool {
	end := HeaderLen + len(u.Name)
	return len(req) >= end+4 && sameQuestion(u, req[HeaderLen:end],
		binary.BigEndian.Uint16(req[end:]), binary.BigEndian.Uint16(req[end+2:]))
}

func sameQuestion[T string | []byte](u *Upstream, name T, typ, class uint16) bool {
	if u.Type != typ || u.Class != class || len(u.Name) != len(name) {
		return false
	}
	for i := range u.Name {
		if lower(u.Name[i]) != lower(name[i]) {
			return false
		}
	}
	return true
}

// PackUpstream stores a reply ScanUpstream read as u: the same as
// PackOwned does with the unpacked reply (ID zero, question lowercased, OPT
// removed, TTL offsets indexed) but on the bytes, as the upstream
// compressed them. With maxTTL > 0 every TTL is lowered to at most maxTTL.
// room bytes (a multiple of 8) are left free in front of the Packed for a
// holder's own fields. msg is not modified.
func PackUpstream(msg []byte, u *Upstream, maxTTL uint32, room int) *Packed {
	p, body := newBlock(room, u.end+2*u.records)
	body = append(body, msg[:u.end]...)
	binary.BigEndian.PutUint16(body, 0)
	if u.end < len(msg) { // the OPT record was cut
		binary.BigEndian.PutUint16(body[10:], binary.BigEndian.Uint16(body[10:])-1)
	}
	for i := HeaderLen; i < u.qEnd-4; i++ {
		body[i] = lower(body[i])
	}
	_ = p.indexTTLs(body, u.qEnd, u.records, maxTTL) // checked by ScanUpstream
	return p
}
