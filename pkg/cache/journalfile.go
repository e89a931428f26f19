package cache

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nodecache/nodecache/pkg/wire"
)

// The journal file's ring (journal.go writes it) and its readers.

// maxJournalBytes bounds a ring's size (the header's offsets are checked
// against it).
const maxJournalBytes = 1 << 32

// JournalScan is what ScanJournal found in a journal file, for
// ImportJournal and for JournalConfig to continue the ring.
type JournalScan struct {
	Records int   // whole records
	Bytes   int64 // bytes of the ring they take
	// Cost is what holding every record would charge the cache, about.
	Cost int64

	ring   ringState
	extent int64 // the file's size
}

// ScanJournal reads the header and the record lengths of the journal in f
// (without moving f's offset) and says where its whole records are.
// Records past the first malformed length are not counted (a kill leaves
// none: see journal.go). It fails for a file that is not a journal of this
// version.
func ScanJournal(f *os.File) (JournalScan, error) {
	fi, err := f.Stat()
	if err != nil {
		return JournalScan{}, fmt.Errorf("reading cache journal: %w", err)
	}
	var hdr [journalHdrLen]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return JournalScan{}, fmt.Errorf("reading cache journal header: %w: %w", ErrBadDump, err)
	}
	if string(hdr[:len(journalMagic)]) != journalMagic || hdr[len(journalMagic)] != journalVersion {
		return JournalScan{}, fmt.Errorf("reading cache journal header: %w: not a version %d journal", ErrBadDump, journalVersion)
	}
	h := hdr[len(journalMagic)+1:]
	r := ringState{size: int64(binary.BigEndian.Uint64(h)), tail: int64(binary.BigEndian.Uint64(h[8:])),
		used: int64(binary.BigEndian.Uint64(h[16:]))}
	if r.size < MinJournalBytes || r.size > maxJournalBytes || r.tail < 0 || r.tail >= r.size || r.used < 0 || r.used > r.size {
		return JournalScan{}, fmt.Errorf("reading cache journal header: %w: ring of %d bytes, tail %d, used %d", ErrBadDump, r.size, r.tail, r.used)
	}
	s := JournalScan{extent: fi.Size()}
	rr := newRingReader(f, r.size, r.tail)
	left := r.used
	for left > 0 {
		if skip := rr.skip(); skip > 0 {
			if skip > left {
				break
			}
			r.appendItem(ringItem{n: int32(-skip)})
			left -= skip
			continue
		}
		l, err := rr.length()
		if err != nil || l < minJournalBody || l > maxJournalBody || journalHeadLen+l > left || journalFixedLen+l > r.size-rr.pos {
			break // malformed: the ring ends before it
		}
		if err := rr.discard(journalFixedLen + l); err != nil {
			break
		}
		r.appendItem(ringItem{n: int32(journalHeadLen + l)})
		left -= journalHeadLen + l
		s.Records++
		s.Cost += l + journalCutLen + entryOverhead
	}
	r.used -= left
	s.Bytes, s.ring = r.used, r
	return s, nil
}

// ringReader reads a ring's records in order from a position, starting
// again at the ring's start when it reaches its end.
type ringReader struct {
	f    *os.File
	size int64
	pos  int64 // in the ring
	br   *bufio.Reader
}

func newRingReader(f *os.File, size, pos int64) *ringReader {
	rr := &ringReader{f: f, size: size, br: bufio.NewReaderSize(nil, 64<<10)}
	rr.seek(pos)
	return rr
}

func (rr *ringReader) seek(pos int64) {
	rr.pos = pos
	rr.br.Reset(io.NewSectionReader(rr.f, journalHdrLen+pos, rr.size-pos))
}

// skip moves to the ring's start when the bytes left before its end are
// skipped ones (fewer than a length, or a zero length) and returns how
// many; zero when a record starts here.
func (rr *ringReader) skip() int64 {
	left := rr.size - rr.pos
	if left >= journalLenLen {
		lb, err := rr.br.Peek(journalLenLen)
		if err != nil || binary.BigEndian.Uint16(lb) != 0 {
			return 0
		}
	}
	rr.seek(0)
	return left
}

// length reads a record's length: its body's.
func (rr *ringReader) length() (int64, error) {
	var lb [journalLenLen]byte
	if _, err := io.ReadFull(rr.br, lb[:]); err != nil {
		return 0, err
	}
	rr.pos += journalLenLen
	return int64(binary.BigEndian.Uint16(lb[:])), nil
}

func (rr *ringReader) discard(n int64) error {
	if _, err := rr.br.Discard(int(n)); err != nil {
		return err
	}
	rr.pos += n
	return nil
}

func (rr *ringReader) read(buf []byte) error {
	if _, err := io.ReadFull(rr.br, buf); err != nil {
		return err
	}
	rr.pos += int64(len(buf))
	return nil
}

// ImportJournal stores the fresh entries of the journal in f that scan
// (from ScanJournal) found, oldest first, each unless the cache already
// holds its key, judged again as Import judges a predecessor's. When the
// records would cost more than maxBytes (zero or less: no bound) the
// oldest are skipped. It stops when ctx ends, and returns the number of
// entries stored. It notes in scan which entry each record holds, for a
// journal that continues the ring (JournalConfig.Scan): start that one's
// writing after the import (JournalConfig.After).
func (c *Cache) ImportJournal(ctx context.Context, f *os.File, scan JournalScan, maxBytes int64) (int, error) {
	skip := int64(0)
	if maxBytes > 0 && scan.Cost > maxBytes {
		skip = scan.Cost - maxBytes
	}
	rr := newRingReader(f, scan.ring.size, scan.ring.tail)
	n, i := 0, 0
	buf := make([]byte, 0, 4096)
	var d journalDecoder
	items := scan.ring.live()
	for k, it := range items {
		if it.n < 0 {
			rr.seek(0)
			continue
		}
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("importing cache journal: %w", err)
		}
		i++
		l := int64(it.n) - journalLenLen // the fixed fields and the body
		// The last record ended at the ring's end.
		if rr.pos == rr.size {
			rr.seek(0)
		}
		if err := rr.discard(journalLenLen); err != nil {
			return n, fmt.Errorf("reading cache journal record %d: %w: %w", i, ErrBadDump, err)
		}
		if skip > 0 {
			skip -= l - journalFixedLen + journalCutLen + entryOverhead
			if err := rr.discard(l); err != nil {
				return n, fmt.Errorf("reading cache journal record %d: %w: %w", i, ErrBadDump, err)
			}
			continue
		}
		if l > int64(cap(buf)) {
			buf = make([]byte, l)
		}
		buf = buf[:l]
		if err := rr.read(buf); err != nil {
			return n, fmt.Errorf("reading cache journal record %d: %w: %w", i, ErrBadDump, err)
		}
		now := c.cfg.Now()
		e, key, err := d.decode(c, buf, now)
		if err != nil {
			return n, fmt.Errorf("decoding cache journal record %d: %w: %w", i, ErrBadDump, err)
		}
		if e == nil {
			continue
		}
		h, ok := c.insertAbsent(&key, e, now)
		if ok {
			n++
		}
		// The journal that continues this ring knows the entry: a hit
		// before its record is overwritten writes it again.
		items[k].h, items[k].stored = h, uint16(e.stored)
	}
	return n, nil
}

// insertAbsent stores e unless its key holds a newer entry already (one
// fetched since the restart), and returns its key's hash.
func (c *Cache) insertAbsent(key *wire.Key, e *entry, now time.Time) (uint64, bool) {
	h := key.Hash(c.seed)
	s := c.shardOf(h)
	s.mu.Lock()
	if old, ok := s.lru.Peek(h); ok && old.stored > e.stored {
		s.mu.Unlock()
		return h, false
	}
	s.mu.Unlock()
	return h, c.insertUnjournalled(h, e, now) // its record is in the journal already
}
