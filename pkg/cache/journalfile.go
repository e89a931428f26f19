package cache

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"time"
)

// The journal file's two readers and its one full writer (journal.go
// appends to it).

// writeJournal writes a whole journal to f: the header, then the fresh
// entries, each shard oldest first and the shards interleaved, leaving
// out the oldest of each shard alike when all would exceed maxBytes. It
// returns the entries written and the file's size.
func (c *Cache) writeJournal(f *os.File, maxBytes int64) (int, int64, error) {
	now := c.cfg.Now()
	snaps := make([][]*entry, len(c.shards))
	var total int64
	for i, s := range c.shards {
		snap := s.snapshot() // most recently used first
		fresh := make([]*entry, 0, len(snap))
		for k := len(snap) - 1; k >= 0; k-- {
			if snap[k].fresh(now) {
				fresh = append(fresh, snap[k])
			}
		}
		snaps[i] = fresh
		for _, e := range fresh {
			total += int64(4 + recordLen(e))
		}
	}
	if budget := maxBytes - journalHdrLen; total > budget {
		keep := float64(budget) / float64(total)
		for i, snap := range snaps {
			var bytes int64
			for _, e := range snap {
				bytes += int64(4 + recordLen(e))
			}
			target := int64(keep * float64(bytes))
			for len(snap) > 0 && bytes > target {
				bytes -= int64(4 + recordLen(snap[0]))
				snap = snap[1:]
			}
			snaps[i] = snap
		}
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	bw.WriteString(journalMagic) //nolint:errcheck,gosec // bufio keeps the first error for Flush
	bw.WriteByte(journalVersion) //nolint:errcheck,gosec
	size, n := journalHdrLen, 0
	var rec []byte
	for i := 0; ; i++ {
		more := false
		for _, snap := range snaps {
			if i >= len(snap) {
				continue
			}
			more = true
			rec = encodeRecord(binary.BigEndian.AppendUint32(rec[:0], uint32(recordLen(snap[i]))), snap[i])
			bw.Write(rec) //nolint:errcheck,gosec
			size += int64(len(rec))
			n++
		}
		if !more {
			break
		}
	}
	if err := bw.Flush(); err != nil {
		return 0, 0, fmt.Errorf("writing cache journal: %w", err)
	}
	return n, size, nil
}

// JournalScan is what ScanJournal found in a journal file.
type JournalScan struct {
	End     int64 // where the last whole record ends: the journal continues here
	Records int   // whole records
	// Cost is what holding every record would charge the cache, about.
	Cost int64
}

// ScanJournal reads the record lengths of the journal in f (from offset
// 0, without moving f's offset) and says where its whole records end. A
// torn last record, left by a process killed while writing it, is not
// counted. It fails for a file that is not a journal of this version.
func ScanJournal(f *os.File) (JournalScan, error) {
	fi, err := f.Stat()
	if err != nil {
		return JournalScan{}, fmt.Errorf("reading cache journal: %w", err)
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, fi.Size()), 64<<10)
	var hdr [len(journalMagic) + 1]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return JournalScan{}, fmt.Errorf("reading cache journal header: %w: %w", ErrBadDump, err)
	}
	if string(hdr[:len(journalMagic)]) != journalMagic || hdr[len(journalMagic)] != journalVersion {
		return JournalScan{}, fmt.Errorf("reading cache journal header: %w: not a version %d journal", ErrBadDump, journalVersion)
	}
	s := JournalScan{End: journalHdrLen}
	for {
		var lb [4]byte
		if _, err := io.ReadFull(br, lb[:]); err != nil {
			return s, nil // the end, or a torn length
		}
		l := int64(binary.BigEndian.Uint32(lb[:]))
		if l < recordFixedLen+1 || l > maxRecordLen {
			return s, nil // torn: stop before it
		}
		if n, _ := br.Discard(int(l)); int64(n) < l {
			return s, nil
		}
		s.End += 4 + l
		s.Records++
		s.Cost += l + entryOverhead
	}
}

// ImportJournal stores the fresh entries of the journal in f that scan
// (from ScanJournal) found, each unless the cache already holds its key,
// judged again as Import judges a predecessor's. When the records would
// cost more than maxBytes (zero or less: no bound) the oldest are skipped.
// It stops when ctx ends, and returns the number of entries stored.
func (c *Cache) ImportJournal(ctx context.Context, f *os.File, scan JournalScan, maxBytes int64) (int, error) {
	br := bufio.NewReaderSize(io.NewSectionReader(f, journalHdrLen, scan.End-journalHdrLen), 64<<10)
	skip := int64(0)
	if maxBytes > 0 && scan.Cost > maxBytes {
		skip = scan.Cost - maxBytes
	}
	n := 0
	buf := make([]byte, 0, 4096)
	for i := range scan.Records {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("importing cache journal: %w", err)
		}
		now := c.cfg.Now()
		var lb [4]byte
		if _, err := io.ReadFull(br, lb[:]); err != nil {
			return n, fmt.Errorf("reading cache journal record %d: %w: %w", i, ErrBadDump, err)
		}
		l := int(binary.BigEndian.Uint32(lb[:]))
		if skip > 0 {
			skip -= int64(l) + entryOverhead
			if _, err := br.Discard(l); err != nil {
				return n, fmt.Errorf("reading cache journal record %d: %w: %w", i, ErrBadDump, err)
			}
			continue
		}
		if l > cap(buf) {
			buf = make([]byte, l)
		}
		buf = buf[:l]
		if _, err := io.ReadFull(br, buf); err != nil {
			return n, fmt.Errorf("reading cache journal record %d: %w: %w", i, ErrBadDump, err)
		}
		e, err := c.decodeRecord(buf, now)
		if err != nil {
			return n, fmt.Errorf("decoding cache journal record %d: %w: %w", i, ErrBadDump, err)
		}
		if e != nil && c.insertAbsent(e, now) {
			n++
		}
	}
	return n, nil
}

// insertAbsent stores e unless its key holds a newer entry already (one
// fetched since the restart).
func (c *Cache) insertAbsent(e *entry, now time.Time) bool {
	key := e.key()
	h := key.Hash(c.seed)
	s := c.shardOf(h)
	s.mu.Lock()
	if old, ok := s.lru.Peek(h); ok && old.stored > e.stored {
		s.mu.Unlock()
		return false
	}
	s.mu.Unlock()
	return c.insertUnjournalled(h, e, now) // its record is in the journal already
}
