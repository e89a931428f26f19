package cache

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// Import reads a stream written by Export and stores its entries that are
// still fresh, subject to this cache's TTL caps and byte budget. It stops at
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
		if e != nil && c.insert(e.key.Hash(c.seed), e, now) {
			n++
		}
	}
}

// decodeRecord checks and decodes one record into an entry, or returns nil
// for an entry already expired.
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
	m := new(dns.Msg)
	if err := m.Unpack(b[22:]); err != nil {
		return nil, fmt.Errorf("unpacking reply for %s: %w", pres, err)
	}
	if !questionMatches(&key, m) {
		return nil, fmt.Errorf("reply does not answer %s", pres)
	}
	if stored.After(now) { // a clock stepped back: trust no more than now
		stored = now
	}
	ttl = min(ttl, c.capFor(k)).Truncate(time.Second)
	if ttl <= 0 || !now.Before(stored.Add(ttl)) {
		return nil, nil
	}
	p, err := wire.Pack(clampTTLs(m, ttl))
	if err != nil {
		return nil, fmt.Errorf("packing reply for %s: %w", pres, err)
	}
	return newEntry(key, p, k, stored, ttl), nil
}

// capFor is the longest this cache keeps an entry of kind k.
func (c *Cache) capFor(k kind) time.Duration {
	switch k {
	case kindNegative:
		return c.lim.maxNegativeTTL
	case kindServfail:
		return c.lim.servfailTTL
	}
	return c.lim.maxTTL
}
