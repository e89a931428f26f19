package wire

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"strings"

	"github.com/miekg/dns"
)

// Key identifies a cached reply: the lowercased question name in wire form,
// type, class, and the DO and CD bits, which change what an upstream returns.
type Key struct {
	Name  string // lowercased, wire form
	Type  uint16
	Class uint16
	DO    bool
	CD    bool
}

// Key returns q's cache key. It allocates; the hit path uses Hash and Matches.
func (q *Query) Key() Key {
	return Key{Name: string(q.LowerName()), Type: q.Type, Class: q.Class, DO: q.DO, CD: q.CD()}
}

// Matches reports whether k is q's key, without allocating.
func (q *Query) Matches(k *Key) bool {
	return k.Type == q.Type && k.Class == q.Class && k.DO == q.DO && k.CD == q.CD() &&
		k.Name == string(q.LowerName())
}

// Hash returns q's key hash under seed, without allocating; equal to
// q.Key().Hash(seed).
// It hashes the name where Parse lowercased it, with the rest of the key
// written after it.
func (q *Query) Hash(seed maphash.Seed) uint64 {
	n := q.lowerLen
	b := q.lower[:n+keyTrailerLen]
	putKeyTrailer(b[n:], q.Type, q.Class, q.DO, q.CD())
	return maphash.Bytes(seed, b)
}

// Hash returns k's hash under seed.
func (k *Key) Hash(seed maphash.Seed) uint64 {
	var b [MaxNameLen + keyTrailerLen]byte
	n := copy(b[:MaxNameLen], k.Name)
	putKeyTrailer(b[n:], k.Type, k.Class, k.DO, k.CD)
	return maphash.Bytes(seed, b[:n+keyTrailerLen])
}

// keyTrailerLen is the size of what follows the name in the bytes a key
// hash is computed over: type, class, and a byte of DO and CD.
const keyTrailerLen = 5

func putKeyTrailer(b []byte, typ, class uint16, do, cd bool) {
	binary.BigEndian.PutUint16(b, typ)
	binary.BigEndian.PutUint16(b[2:], class)
	var bits byte
	if do {
		bits |= 1
	}
	if cd {
		bits |= 2
	}
	b[4] = bits
}

// NewKey builds a key from a presentation-form name.
func NewKey(name string, typ, class uint16, do, cd bool) (Key, error) {
	var b [MaxNameLen]byte
	n, err := dns.PackDomainName(dns.Fqdn(strings.ToLower(name)), b[:], 0, nil, false)
	if err != nil {
		return Key{}, fmt.Errorf("packing name %q: %w", name, err)
	}
	return Key{Name: string(b[:n]), Type: typ, Class: class, DO: do, CD: cd}, nil
}

// KeyOf returns the key of a request message.
func KeyOf(m *dns.Msg) (Key, error) {
	if len(m.Question) != 1 {
		return Key{}, fmt.Errorf("key of message: %d questions, want 1", len(m.Question))
	}
	q := m.Question[0]
	do := false
	if opt := m.IsEdns0(); opt != nil {
		do = opt.Do()
	}
	return NewKey(q.Name, q.Qtype, q.Qclass, do, m.CheckingDisabled)
}

// PresentationName returns k's name in presentation form ("example.org.").
func (k *Key) PresentationName() string {
	name, _, err := dns.UnpackDomainName([]byte(k.Name), 0)
	if err != nil {
		return "?"
	}
	return name
}

// AppendRequest appends to dst the query an upstream is asked for k's
// entry, with ID zero: its question (lowercased), RD set, CD as the key
// says, and an OPT record advertising DefaultUDPSize with the key's DO,
// never AD. The reply is stored under k and served to every client whose
// query has k, so nothing else of the client's query may shape it: not a
// clear RD (an upstream answering from its own cache only), not a missing
// OPT (a reply cut to 512 bytes), not AD. It allocates nothing when dst
// has room for len(k.Name)+27 bytes.
func (k *Key) AppendRequest(dst []byte) []byte {
	flags := uint16(flagRD)
	if k.CD {
		flags |= flagCD
	}
	var ednsFlags uint16
	if k.DO {
		ednsFlags = 0x8000
	}
	dst = append(dst, 0, 0, byte(flags>>8), byte(flags), 0, 1, 0, 0, 0, 0, 0, 1)
	dst = append(dst, k.Name...)
	dst = binary.BigEndian.AppendUint16(dst, k.Type)
	dst = binary.BigEndian.AppendUint16(dst, k.Class)
	// OPT: root owner, type, UDP size, extended rcode and version 0, flags, no options.
	dst = append(dst, 0, 0, typeOPT, byte(DefaultUDPSize>>8), byte(DefaultUDPSize&0xFF), 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, ednsFlags)
	return append(dst, 0, 0)
}

// Request returns q as a dns.Msg to build a reply from (zone answers,
// autopath, ANY): one question in the client's case, RD and CD as asked,
// and an OPT with DO when asked. AD is never set: nodecache validates
// nothing. Upstream queries are built by Key.AppendRequest instead.
func (q *Query) Request() *dns.Msg {
	name, _, err := dns.UnpackDomainName(q.Name, 0)
	if err != nil { // Parse validated the name; keep the lowercase form
		name = "."
	}
	m := new(dns.Msg)
	m.Id = q.ID
	m.RecursionDesired = q.RD()
	m.CheckingDisabled = q.CD()
	m.Question = []dns.Question{{Name: name, Qtype: q.Type, Qclass: q.Class}}
	if q.EDNS || q.DO {
		m.SetEdns0(DefaultUDPSize, q.DO)
	}
	return m
}
