package cache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// A journal record (version 4) is
//
//	u16 body length, u8 bits (1 DO, 2 CD, the kind times 4), u32 TTL (s),
//	u48 stored (Unix ms), then the body: the stored reply without its ID
//	and question count (zero and one in every stored reply).
//
// Everything else an entry's key holds is the reply's question's: its name
// (lowercased, as the key's), type and class. The handover record
// (handover.go) spells them out, and its times in nanoseconds: 26 bytes
// besides the reply where this takes 13 and 4 fewer of the reply, about a
// seventh of a record for the benchmark's names, and so a seventh more
// entries in the same ring. The stored time loses less than a millisecond
// (rounded down: the entry ends no later than it did).
const (
	journalLenLen   = 2         // the body length's bytes
	journalFixedLen = 1 + 4 + 6 // bits, TTL, stored
	journalHeadLen  = journalLenLen + journalFixedLen
	journalCutLen   = 4                          // the reply's ID and question count, not written
	minJournalBody  = 12 + 1 + 4 - journalCutLen // a reply's header and a question for the root
	maxJournalBody  = dns.MaxMsgSize - journalCutLen
	// maxJournalRecordLen is the longest record, its length included.
	maxJournalRecordLen = journalHeadLen + maxJournalBody
)

// journalRecordLen is the length of e's journal record, its length
// included.
func journalRecordLen(e *entry) int { return journalHeadLen + e.packed.Len() - journalCutLen }

// appendJournalRecord appends e's journal record, its length first, to b.
func appendJournalRecord(b []byte, e *entry) []byte {
	msg := e.packed.Wire()
	b = binary.BigEndian.AppendUint16(b, uint16(len(msg)-journalCutLen))
	bits := byte(e.kind) << 2
	if e.do {
		bits |= 1
	}
	if e.cd {
		bits |= 2
	}
	b = append(b, bits)
	b = binary.BigEndian.AppendUint32(b, e.ttl)
	ms := uint64(max(e.stored, 0) / int64(time.Millisecond))
	b = append(b, byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms))
	b = append(b, msg[2:4]...) // the flags; the question count is msg[4:6]
	return append(b, msg[6:]...)
}

// journalDecoder decodes journal records, in one scratch buffer.
type journalDecoder struct {
	msg []byte // the reply rebuilt from a body
}

// decode checks the journal record rec (without its length: the fixed
// fields and the body) and returns its entry and key, judged again as a
// handover record is (admit). It returns a nil entry for one expired or
// that this cache would not store as the record claims.
func (d *journalDecoder) decode(c *Cache, rec []byte, now time.Time) (*entry, wire.Key, error) {
	if len(rec) < journalFixedLen+minJournalBody {
		return nil, wire.Key{}, errors.New("record too short for a reply")
	}
	bits := rec[0]
	k := kind(bits >> 2)
	if bits>>4 != 0 || k >= numKinds {
		return nil, wire.Key{}, fmt.Errorf("bad flags %#x", bits)
	}
	ttl := time.Duration(binary.BigEndian.Uint32(rec[1:])) * time.Second
	ms := uint64(binary.BigEndian.Uint16(rec[5:]))<<32 | uint64(binary.BigEndian.Uint32(rec[7:]))
	stored := time.UnixMilli(int64(ms))
	if ttl <= 0 {
		return nil, wire.Key{}, errors.New("ttl 0")
	}
	body := rec[journalFixedLen:]
	d.msg = append(append(append(d.msg[:0], 0, 0), body[:2]...), 0, 1)
	d.msg = append(d.msg, body[2:]...)
	msg := d.msg
	do, cd := bits&1 != 0, bits&2 != 0
	if u, ok := wire.ScanUpstream(msg); ok {
		key := wire.Key{Name: wire.LowerName(u.Name), Type: u.Type, Class: u.Class, DO: do, CD: cd}
		e := c.admitScanned(&key, k, stored, ttl, msg, &u, now)
		return e, key, nil
	}
	m := new(dns.Msg)
	if err := m.Unpack(msg); err != nil {
		return nil, wire.Key{}, fmt.Errorf("unpacking reply: %w", err)
	}
	if len(m.Question) != 1 {
		return nil, wire.Key{}, fmt.Errorf("reply with %d questions", len(m.Question))
	}
	q := m.Question[0]
	key, err := wire.NewKey(q.Name, q.Qtype, q.Qclass, do, cd)
	if err != nil {
		return nil, wire.Key{}, fmt.Errorf("reply's question: %w", err)
	}
	e, err := c.admitUnpacked(&key, k, stored, ttl, m, now)
	return e, key, err
}
