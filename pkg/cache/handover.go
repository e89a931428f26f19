package cache

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// The handover stream: the 8-byte header dumpMagic+dumpVersion, then
// records, each a big-endian uint32 length and that many bytes, then a
// zero length marking a complete stream. A record is
//
//	u8 name length, name (wire form, lowercased), u16 type, u16 class,
//	u8 flags (1 DO, 2 CD), u8 kind, i64 stored (Unix ns), i64 TTL (ns),
//	the reply in wire form (the rest).
const (
	dumpMagic      = "NCCACHE"
	dumpVersion    = 1
	recordFixedLen = 1 + 2 + 2 + 1 + 1 + 8 + 8
	maxRecordLen   = recordFixedLen + wire.MaxNameLen + dns.MaxMsgSize
)

// ErrBadDump is wrapped by Import's errors for input that is not a
// complete dump of a version it reads.
var ErrBadDump = errors.New("cache: malformed dump")

// Export writes the fresh entries, most recently used first, for a
// successor's Import. It stops before the stream would exceed maxBytes
// (zero or less: no bound) and at deadline (by the cache clock; also set on
// w when it has SetWriteDeadline), still ending the stream properly, and
// returns the number of entries written. Reaching the deadline is reported
// as an error wrapping os.ErrDeadlineExceeded.
func (c *Cache) Export(w io.Writer, maxBytes int64, deadline time.Time) (int, error) {
	if d, ok := w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		if err := d.SetWriteDeadline(deadline); err != nil {
			return 0, fmt.Errorf("setting export deadline: %w", err)
		}
	}
	bw := bufio.NewWriter(w)
	written := int64(len(dumpMagic) + 1 + 4) // header and end marker
	bw.WriteString(dumpMagic)                //nolint:errcheck,gosec // bufio keeps the first error for Flush
	bw.WriteByte(dumpVersion)                //nolint:errcheck,gosec
	n, stopErr := c.exportEntries(bw, maxBytes, written, deadline)
	if stopErr != nil && !errors.Is(stopErr, os.ErrDeadlineExceeded) {
		return n, stopErr
	}
	if err := binary.Write(bw, binary.BigEndian, uint32(0)); err != nil {
		return n, fmt.Errorf("ending cache dump: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("flushing cache dump: %w", err)
	}
	return n, stopErr
}

// exportEntries writes the records, shards interleaved so that the most
// recently used entries of every shard come first. It stops cleanly at
// maxBytes, and with an error wrapping os.ErrDeadlineExceeded at deadline.
func (c *Cache) exportEntries(bw *bufio.Writer, maxBytes, written int64, deadline time.Time) (int, error) {
	n := 0
	var rec []byte
	var err error
	c.eachRecent(func(e *entry) bool {
		now := c.cfg.Now()
		if !deadline.IsZero() && !now.Before(deadline) {
			err = fmt.Errorf("exporting cache: %w", os.ErrDeadlineExceeded)
			return false
		}
		if !e.fresh(now) {
			return true
		}
		rec = encodeRecord(binary.BigEndian.AppendUint32(rec[:0], uint32(recordLen(e))), e)
		if maxBytes > 0 && written+int64(len(rec)) > maxBytes {
			return false
		}
		if _, werr := bw.Write(rec); werr != nil {
			err = fmt.Errorf("writing cache dump: %w", werr)
			return false
		}
		written += int64(len(rec))
		n++
		return true
	})
	return n, err
}

// eachRecent calls fn with the cache's entries, the shards interleaved so
// that the most recently used of every shard come first, until fn returns
// false.
func (c *Cache) eachRecent(fn func(*entry) bool) {
	snaps := make([][]*entry, len(c.shards))
	for i, s := range c.shards {
		snaps[i] = s.snapshot()
	}
	for i := 0; ; i++ {
		more := false
		for _, snap := range snaps {
			if i >= len(snap) {
				continue
			}
			more = true
			if !fn(snap[i]) {
				return
			}
		}
		if !more {
			return
		}
	}
}

// encodeRecord appends e's record to b: the stored reply as it is (a valid
// message that decodeRecord unpacks and judges again), with no unpacking.
func encodeRecord(b []byte, e *entry) []byte {
	name, typ, class := e.packed.Question()
	msg := e.packed.Wire()
	b = append(b, byte(len(name)))
	b = append(b, name...)
	var flags byte
	if e.do {
		flags |= 1
	}
	if e.cd {
		flags |= 2
	}
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint16(b, class)
	b = append(b, flags, byte(e.kind))
	b = binary.BigEndian.AppendUint64(b, uint64(e.stored))
	b = binary.BigEndian.AppendUint64(b, uint64(e.lifetime()))
	return append(b, msg...)
}

// recordLen is the length of e's record.
func recordLen(e *entry) int {
	name, _, _ := e.packed.Question()
	return recordFixedLen + len(name) + e.packed.Len()
}

// Import reads a stream written by Export and stores its entries that are
// still fresh, subject to this cache's TTL caps and byte budget. Each reply
// is judged again as if fetched (decide): one this cache would not store as
// the record claims it (kind, lifetime, flags, shape) is skipped and counted
// in uncacheable_total, never trusted. It stops at
// deadline (by the cache clock; also set on r when it has SetReadDeadline)
// and at the first malformed record, returning an error wrapping ErrBadDump
// then; entries read before stay. It returns the number of entries stored.
func (c *Cache) Import(r io.Reader, deadline time.Time) (int, error) {
	if d, ok := r.(interface{ SetReadDeadline(time.Time) error }); ok {
		if err := d.SetReadDeadline(deadline); err != nil {
			return 0, fmt.Errorf("setting import deadline: %w", err)
		}
	}
	br := bufio.NewReader(r)
	var hdr [len(dumpMagic) + 1]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return 0, fmt.Errorf("reading cache dump header: %w: %w", ErrBadDump, err)
	}
	if string(hdr[:len(dumpMagic)]) != dumpMagic {
		return 0, fmt.Errorf("reading cache dump header: %w: bad magic", ErrBadDump)
	}
	if v := hdr[len(dumpMagic)]; v != dumpVersion {
		return 0, fmt.Errorf("reading cache dump header: %w: version %d, want %d", ErrBadDump, v, dumpVersion)
	}
	n := 0
	buf := make([]byte, 0, 4096)
	for i := 0; ; i++ {
		now := c.cfg.Now()
		if !deadline.IsZero() && !now.Before(deadline) {
			return n, fmt.Errorf("importing cache: %w", os.ErrDeadlineExceeded)
		}
		var l uint32
		if err := binary.Read(br, binary.BigEndian, &l); err != nil {
			return n, fmt.Errorf("reading cache dump record %d: %w: %w", i, ErrBadDump, err)
		}
		if l == 0 {
			return n, nil
		}
		if l < recordFixedLen+1 || l > maxRecordLen {
			return n, fmt.Errorf("reading cache dump record %d: %w: length %d", i, ErrBadDump, l)
		}
		if int(l) > cap(buf) {
			buf = make([]byte, l)
		}
		buf = buf[:l]
		if _, err := io.ReadFull(br, buf); err != nil {
			return n, fmt.Errorf("reading cache dump record %d: %w: %w", i, ErrBadDump, err)
		}
		e, err := c.decodeRecord(buf, now)
		if err != nil {
			return n, fmt.Errorf("decoding cache dump record %d: %w: %w", i, ErrBadDump, err)
		}
		if e == nil {
			continue
		}
		if key := e.key(); c.insert(key.Hash(c.seed), e, now) {
			n++
		}
	}
}

// decodeRecord checks and decodes one record into an entry, or returns nil
// for an entry already expired or one a fetch would not have stored as
// the record claims (admit.go). The reply in b is changed.
func (c *Cache) decodeRecord(b []byte, now time.Time) (*entry, error) {
	nl := int(b[0])
	if len(b) < 1+nl+recordFixedLen-1 {
		return nil, fmt.Errorf("name length %d overruns the record", nl)
	}
	name, b := b[1:1+nl], b[1+nl:]
	pres, off, err := dns.UnpackDomainName(name, 0)
	if err != nil || off != nl {
		return nil, fmt.Errorf("bad name in record")
	}
	typ, class := binary.BigEndian.Uint16(b), binary.BigEndian.Uint16(b[2:])
	flags, k := b[4], kind(b[5])
	key, err := wire.NewKey(pres, typ, class, flags&1 != 0, flags&2 != 0)
	if err != nil || key.Name != string(name) || flags > 3 || k >= numKinds {
		return nil, fmt.Errorf("bad key in record for %q", pres)
	}
	stored := time.Unix(0, int64(binary.BigEndian.Uint64(b[6:])))
	ttl := time.Duration(binary.BigEndian.Uint64(b[14:]))
	if ttl <= 0 {
		return nil, fmt.Errorf("ttl %v of %s", ttl, pres)
	}
	msg := b[22:]
	if u, ok := wire.ScanUpstream(msg); ok {
		if !u.QuestionIs(key.Name, key.Type, key.Class) {
			return nil, fmt.Errorf("reply does not answer %s", pres)
		}
		return c.admitScanned(&key, k, stored, ttl, msg, &u, now), nil
	}
	m := new(dns.Msg)
	if err := m.Unpack(msg); err != nil {
		return nil, fmt.Errorf("unpacking reply for %s: %w", pres, err)
	}
	return c.admitUnpacked(&key, k, stored, ttl, m, now)
}

// judgeImported is decide for an imported reply, which must also have the
// shape of one a fetch stores: a response to a standard query asked with
// recursion desired (as the cache asks), not truncated.
func judgeImported(l limits, key *wire.Key, m *dns.Msg) (time.Duration, kind, reason) {
	if !m.Response || m.Opcode != dns.OpcodeQuery || !m.RecursionDesired {
		return 0, 0, reasonImport
	}
	return decide(l, key, m)
}
