package cache

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

// The journal's ring: where a record goes, what it overwrites, the writes
// of a batch in the order that keeps the file whole at every point, and
// the second chance of a record whose entry is in use.

// ringState is where the records are in a journal's ring.
type ringState struct {
	size, tail, used int64
	// items[head:] are the ring's, oldest first. The array is used again
	// (appendItem), not let go at each record overwritten.
	items []ringItem
	head  int
	// dropped counts the bytes makeRoom took from the tail.
	dropped int64
}

// live returns the ring's items, oldest first.
func (r *ringState) live() []ringItem { return r.items[r.head:] }

// appendItem adds it after the newest item. A full array whose first
// eighth or more is overwritten items moves its items to the front
// instead of growing (a copy of 7/8 of it every 1/8 of it written): the
// ring's items take one array of about their number, and writing makes
// no garbage.
func (r *ringState) appendItem(it ringItem) {
	if len(r.items) == cap(r.items) && r.head > 0 && r.head >= cap(r.items)/8 {
		n := copy(r.items, r.items[r.head:])
		r.items, r.head = r.items[:n], 0
	}
	r.items = append(r.items, it)
}

// ringItem is a record in the ring, or the bytes skipped before the
// ring's end (n < 0). h, stored and hits say which entry a record holds
// and how often it had been hit when written: one hit since is written
// again before it is overwritten. h is zero when unknown. 16 bytes: about
// 0.85 MiB for the default ring's 54,000 records.
type ringItem struct {
	h            uint64 // the key's hash in this process's cache
	n            int32  // the record's bytes, its length included
	stored, hits uint16 // the low 16 bits of the entry's stored time and of its hits
}

func (it ringItem) bytes() int64 { return int64(max(it.n, -it.n)) }

// end is where the next record goes, unless it does not fit there.
func (r *ringState) end() int64 { return (r.tail + r.used) % r.size }

// place returns the bytes to skip before a record of n bytes (those left
// before the ring's end when it does not fit in them) and where it goes.
func (r *ringState) place(n int64) (pad, at int64) {
	e := r.end()
	if r.used == 0 {
		r.tail, e = 0, 0
	}
	if r.size-e < n {
		return r.size - e, 0
	}
	return 0, e
}

// makeRoom drops the oldest items until need bytes are free, and appends
// the records dropped to out.
func (r *ringState) makeRoom(need int64, out []ringItem) []ringItem {
	for r.size-r.used < need && r.head < len(r.items) {
		it := r.items[r.head]
		r.head++
		r.tail = (r.tail + it.bytes()) % r.size
		r.used -= it.bytes()
		r.dropped += it.bytes()
		if it.n > 0 {
			out = append(out, it)
		}
	}
	return out
}

// push adds a record after a skip of pad bytes.
func (r *ringState) push(pad int64, it ringItem) {
	if pad > 0 {
		r.appendItem(ringItem{n: int32(-pad)})
		r.used += pad
	}
	r.appendItem(it)
	r.used += int64(it.n)
}

// writeBatch encodes and writes the fresh entries of batch, in writes
// of at most journalWriteBytes of records through one buffer, and gives
// the records each write overwrote their second chance.
func (j *Journal) writeBatch(batch []pendingEntry) error {
	for len(batch) > 0 {
		n, total := 0, 0
		for n < len(batch) && (n == 0 || total+journalRecordLen(batch[n].e) <= journalWriteBytes) {
			total += journalRecordLen(batch[n].e)
			n++
		}
		if err := j.writeRecords(batch[:n], total); err != nil {
			return err
		}
		batch = batch[n:]
	}
	return nil
}

// writeRecords encodes and writes the fresh entries of batch, whose
// records take at most total bytes, then gives the records they overwrote
// their second chance.
func (j *Journal) writeRecords(batch []pendingEntry, total int) error {
	b, items := slices.Grow(j.buf[:0], total), j.items[:0]
	inserts := 0
	now := j.c.cfg.Now()
	for _, p := range batch {
		if !p.e.fresh(now) {
			continue
		}
		if p.hits == 0 {
			inserts++
		}
		n := len(b)
		b = appendJournalRecord(b, p.e)
		items = append(items, ringItem{h: p.h, n: int32(len(b) - n), stored: uint16(p.e.stored), hits: p.hits})
	}
	victims, err := j.write(b, items)
	if err == nil {
		j.secondChance(victims, now, inserts)
	}
	j.buf, j.items = b[:0], items[:0]
	if cap(j.buf) > 2*journalWriteBytes {
		j.buf = nil // one record larger than a write: not kept
	}
	return err
}

// write places the records in b (items say how long each is) in the ring:
// the header without the records they overwrite, the records, the header
// with them. It returns the records overwritten.
func (j *Journal) write(b []byte, items []ringItem) ([]ringItem, error) {
	spans, victims := j.spans[:0], j.victims[:0]
	defer func() { // the writer's, for the next batch
		clear(spans)
		j.spans, j.victims = spans[:0], victims[:0]
	}()
	usedBefore := j.ring.used
	j.ring.dropped = 0
	from := -1 // where in b the last span's bytes start; -1: it holds none of b
	pos := 0
	for _, it := range items {
		end := pos + int(it.n)
		pad, at := j.ring.place(int64(it.n))
		if pad >= journalLenLen {
			spans = append(spans, journalSpan{j.ring.end(), journalSkipMark[:]}) // a zero length: continue at the start
			from = -1
		}
		victims = j.ring.makeRoom(pad+int64(it.n), victims)
		j.ring.push(pad, it)
		// Records next to each other in the ring (and so in b) go out in
		// one write: a system call per batch, not one per record.
		if last := len(spans) - 1; from >= 0 && pad == 0 && spans[last].off+int64(len(spans[last].b)) == at {
			spans[last].b = b[from:end]
		} else {
			spans = append(spans, journalSpan{at, b[pos:end]})
			from = pos
		}
		pos = end
	}
	if len(victims) > 0 {
		// The header without what is about to be overwritten, nor the new
		// records: a kill while they are written leaves only whole ones.
		if err := j.putHeader(j.ring.tail, usedBefore-j.ring.dropped); err != nil {
			return nil, err
		}
	}
	for _, s := range spans {
		journalWriteHook(journalHdrLen+s.off, s.b)
		if _, err := j.file.WriteAt(s.b, journalHdrLen+s.off); err != nil {
			return nil, fmt.Errorf("appending to the cache journal: %w", err)
		}
		j.extent = max(j.extent, journalHdrLen+s.off+int64(len(s.b)))
	}
	journalWriteHook(0, nil)
	if err := j.writeHeader(); err != nil {
		return nil, err
	}
	j.records.Add(int64(len(items)))
	j.overwritten.Add(int64(len(victims)))
	j.bytes.Store(j.extent)
	return victims, nil
}

// journalSpan is bytes of a batch and where in the ring they go.
type journalSpan struct {
	off int64
	b   []byte
}

// journalSkipMark is the zero length that says the ring's last bytes are
// skipped. Never written to.
var journalSkipMark [journalLenLen]byte

// secondChance queues again, for the next batch, the overwritten records
// whose entry is still cached, fresh, and was hit since it was written: at
// most one for each insert the batch wrote, so that records written again
// do not push out others in a chain (with more names in use than the ring
// holds, the oldest of them go), and the journal writes at most twice what
// is inserted.
func (j *Journal) secondChance(victims []ringItem, now time.Time, inserts int) {
	again := j.again
	for _, v := range victims {
		if len(again)-len(j.again) >= inserts || len(again) >= journalMaxPending {
			break
		}
		if v.h == 0 {
			continue
		}
		s := j.c.shardOf(v.h)
		s.mu.Lock()
		// hits differs from its value then: a hit since (unless exactly a
		// multiple of 65,536 hits since, which no second chance costs little).
		if e, ok := s.lru.Peek(v.h); ok && uint16(e.stored) == v.stored && uint16(e.hits) != v.hits && e.fresh(now) {
			again = append(again, pendingEntry{e: e, h: v.h, hits: max(uint16(e.hits), 1)})
		}
		s.mu.Unlock()
	}
	if len(again) == len(j.again) {
		return
	}
	j.rewritten.Add(int64(len(again) - len(j.again)))
	j.again = again
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// writeHeader writes the header for the ring as it is.
func (j *Journal) writeHeader() error {
	return j.putHeader(j.ring.tail, j.ring.used)
}

func (j *Journal) putHeader(tail, used int64) error {
	h := make([]byte, 0, journalHdrLen)
	h = append(h, journalMagic...)
	h = append(h, journalVersion)
	h = binary.BigEndian.AppendUint64(h, uint64(j.ring.size))
	h = binary.BigEndian.AppendUint64(h, uint64(tail))
	h = binary.BigEndian.AppendUint64(h, uint64(used))
	if _, err := j.file.WriteAt(h, 0); err != nil {
		return fmt.Errorf("writing the cache journal's header: %w", err)
	}
	j.extent = max(j.extent, journalHdrLen)
	return nil
}
