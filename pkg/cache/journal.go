package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nodecache/nodecache/pkg/logkey"
)

// The journal keeps a copy of the cache outside the process, in a file
// another process holds (a memfd the supervisor keeps), so that a process
// killed at any moment restarts warm. It costs the hit path nothing: only
// an insert (a miss) queues its entry, and a goroutine of its own appends
// the queued records in batches.
//
// The file is a ring of a fixed size (JournalConfig.MaxBytes): once full,
// each new record overwrites the oldest ones, so the journal holds the most
// recently inserted entries that fit, never more memory than its size, and
// is never rewritten or copied (no compaction, no second file). A record
// about to be overwritten whose entry is still cached and was hit since it
// was written gets a second chance: the writer appends it again with the
// next batch (JournalStats.Rewritten), so a flood of new names does not push
// out the names in use; the hit path does nothing for it. An entry whose
// insert was dropped with the writer behind (JournalStats.Dropped) is not
// in the journal.
//
// The layout (journalfile.go): a header of journalHdrLen bytes, the
// magic, the version, the ring's size, where the oldest record starts
// (tail) and how many bytes of records follow it (used), then the ring.
// A record is a big-endian uint16 length and the entry's journal record
// (journalrecord.go: its kind, lifetime and stored time, and the reply
// without what every stored reply holds alike; the key is the reply's
// question); a record never wraps: the bytes before the ring's end that
// cannot hold the next one are skipped (a zero length marks them when there
// is room for it). A batch that overwrites records first writes a header
// without them, then the records, then the header with them, so a process
// killed at any point leaves only whole records between tail and used.
const (
	journalMagic   = "NCJRNL\x00"
	journalVersion = 4
	journalHdrLen  = int64(len(journalMagic) + 1 + 3*8)

	journalDelay       = 20 * time.Millisecond // how long queued inserts wait to be written together
	journalMaxPending  = 1 << 14               // queued entries beyond this are dropped (not journalled)
	journalWriteBytes  = 32 << 10              // a write's records (one record more when a single one is larger)
	journalKeepEntries = 2048                  // the longest queue array kept between batches

	// DefaultJournalBytes is the ring's size when JournalConfig.MaxBytes is
	// zero: with the supervisor's own ~2 MiB (as nodecache-supervisor) and
	// the writer's, the protection stays within 10 MiB. About 54,000
	// entries of ~96 bytes (an A reply with its NS and glue) fit.
	DefaultJournalBytes = 5 << 20
	// MinJournalBytes is the smallest ring: a few of the largest records.
	MinJournalBytes = 256 << 10
)

// journalWriteHook runs between the writes of a batch, given the records
// about to be written at off (nil before the header): tests read the file
// there as a process killed at that point, or in the middle of that write,
// leaves it.
var journalWriteHook = func(off int64, b []byte) {}

// JournalConfig says where the journal goes.
type JournalConfig struct {
	// File is the journal to continue: one ScanJournal read (Scan is what
	// it found, and its ring size stands), or nil to start a new file from
	// NewFile, seeded with the cache's most recently used entries.
	File *os.File
	Scan JournalScan
	// MaxBytes is a new file's ring size, at least MinJournalBytes; zero:
	// DefaultJournalBytes.
	MaxBytes int64
	// NewFile returns a new, empty file.
	NewFile func() (*os.File, error)
	// Publish is given the file the journal writes, once, before it does;
	// an error stops the journal.
	Publish func(*os.File) error
	// After, when not nil, holds the writing back until it is closed: the
	// import of File (ImportJournal) reads the records it would overwrite.
	After <-chan struct{}
}

// JournalStats are the journal's figures.
type JournalStats struct {
	// Bytes is the memory the file holds: the pages allocated to it (a
	// memfd whose ring was allocated whole at start holds all of it from
	// the first record), or its size where that is larger or unknown.
	Bytes       int64
	Records     uint64 // records appended since start
	Overwritten uint64 // records overwritten by newer ones: the ring was full
	Rewritten   uint64 // records written again, hit since they were written, before being overwritten
	Dropped     uint64 // inserts not queued, or not written (the writer behind): not in the journal
}

// Journal is a running journal; Close stops it.
type Journal struct {
	c   *Cache
	cfg JournalConfig

	mu      sync.Mutex // guards following
	pending []pendingEntry
	seed    bool // the first flush writes the cache's entries (a new file)

	kick   chan struct{} // cap 1: pending became non-empty
	cancel context.CancelFunc
	done   chan struct{}
	err    error // the writer's end; read after done

	// Owned by the writer goroutine. The slices are used again from batch
	// to batch (buf holds one write's records, journalWriteBytes; the
	// queue arrays are kept up to journalKeepEntries), so that writing
	// makes no garbage: the serving process's heap grows by half of what
	// it collects before each collection.
	file    *os.File
	ring    ringState
	extent  int64 // the file's size
	buf     []byte
	items   []ringItem     // a batch's records
	spans   []journalSpan  // a batch's writes
	victims []ringItem     // the records a batch overwrote
	again   []pendingEntry // second chances, for the next batch
	work    []pendingEntry // a batch: again, then pending
	spare   []pendingEntry // pending's next array

	bytes, records, overwritten, rewritten, drops atomic.Int64
}

// pendingEntry is an entry for the writer, its key's hash, and its hits
// when queued (a record written again) or zero (an insert).
type pendingEntry struct {
	e    *entry
	h    uint64
	hits uint16
}

// StartJournal starts journalling c's inserts as cfg says. There is one
// journal per cache; a second start fails.
func (c *Cache) StartJournal(cfg JournalConfig) (*Journal, error) {
	j, err := c.newJournal(cfg)
	if err != nil {
		return nil, err
	}
	var ctx context.Context
	ctx, j.cancel = context.WithCancel(context.Background())
	go j.run(ctx)
	j.kick <- struct{}{}
	return j, nil
}

// newJournal is StartJournal without the writer: flush writes.
func (c *Cache) newJournal(cfg JournalConfig) (*Journal, error) {
	if cfg.NewFile == nil || cfg.Publish == nil {
		return nil, errors.New("cache journal: NewFile and Publish are required")
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultJournalBytes
	}
	if cfg.MaxBytes < MinJournalBytes || cfg.MaxBytes > maxJournalBytes {
		return nil, fmt.Errorf("cache journal: size %d bytes: want %d to %d", cfg.MaxBytes, MinJournalBytes, int64(maxJournalBytes))
	}
	j := &Journal{c: c, cfg: cfg, kick: make(chan struct{}, 1), done: make(chan struct{})}
	if cfg.File != nil {
		j.file, j.ring = cfg.File, cfg.Scan.ring
		if j.ring.size == 0 {
			return nil, errors.New("cache journal: a file to continue needs its ScanJournal")
		}
		j.extent = cfg.Scan.extent
	} else {
		f, err := cfg.NewFile()
		if err != nil {
			return nil, fmt.Errorf("cache journal: %w", err)
		}
		j.file, j.ring, j.seed = f, ringState{size: cfg.MaxBytes}, true
		if err := j.writeHeader(); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	if err := cfg.Publish(j.file); err != nil {
		if cfg.File == nil {
			_ = j.file.Close()
		}
		return nil, fmt.Errorf("cache journal: publishing %s: %w", j.file.Name(), err)
	}
	if !c.jnl.CompareAndSwap(nil, j) {
		return nil, errors.New("cache journal: already started")
	}
	j.bytes.Store(j.extent)
	return j, nil
}

// add queues e, just stored, for the writer. It never blocks.
func (j *Journal) add(h uint64, e *entry) {
	j.mu.Lock()
	if len(j.pending) >= journalMaxPending {
		j.mu.Unlock()
		j.drops.Add(1)
		return
	}
	j.pending = append(j.pending, pendingEntry{e: e, h: h})
	first := len(j.pending) == 1
	j.mu.Unlock()
	if first {
		select {
		case j.kick <- struct{}{}:
		default:
		}
	}
}

// Close writes what is queued, stops the writer and waits for it. The file
// stays open for whoever holds it; the journal's own descriptor is closed.
func (j *Journal) Close() error {
	j.c.jnl.CompareAndSwap(j, nil)
	if j.cancel == nil { // never started
		return nil
	}
	j.cancel()
	<-j.done
	return j.err
}

// Stats returns the journal's figures.
func (j *Journal) Stats() JournalStats {
	return JournalStats{Bytes: j.held(), Records: uint64(j.records.Load()),
		Overwritten: uint64(j.overwritten.Load()), Rewritten: uint64(j.rewritten.Load()), Dropped: uint64(j.drops.Load())}
}

// held is the memory j's file holds: its allocated blocks, at least its
// size. After Close, when the file cannot be read, its size.
func (j *Journal) held() int64 {
	n := j.bytes.Load()
	if fi, err := j.file.Stat(); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			n = max(n, st.Blocks*512) // st_blocks counts 512-byte units
		}
	}
	return n
}

func (j *Journal) run(ctx context.Context) {
	defer close(j.done)
	defer func() { _ = j.file.Close() }()
	if j.cfg.After != nil {
		select {
		case <-ctx.Done():
		case <-j.cfg.After:
		}
	}
	delay := time.NewTimer(journalDelay)
	defer delay.Stop()
	for {
		select {
		case <-ctx.Done():
			j.err = j.flush()
			return
		case <-j.kick:
		}
		// Let a burst of misses queue up: one write per batch, at most one
		// wake-up per journalDelay, none while nothing is inserted.
		delay.Reset(journalDelay)
		select {
		case <-ctx.Done():
		case <-delay.C:
		}
		if err := j.flush(); err != nil {
			j.err = err
			j.c.log.Error("cache journal stopped: a restart after a crash will start cold", logkey.Err, err)
			j.c.jnl.CompareAndSwap(j, nil)
			return
		}
	}
}

// flush appends the queued entries (on a new file, first the cache's).
// A batch takes at most an eighth of the ring (half of the smallest): the
// records it overwrites are then all older than it. Queued inserts beyond
// that, the oldest, are dropped; the seed is written in as many batches as
// it takes. A batch goes in writes of journalWriteBytes (writeBatch).
func (j *Journal) flush() error {
	j.mu.Lock()
	pending, seed := j.pending, j.seed
	j.pending, j.seed, j.spare = j.spare, false, nil
	j.mu.Unlock()
	defer func() {
		clear(pending)
		j.spare = keepEntries(pending)
	}()
	limit := min(max(j.ring.size/8, maxJournalRecordLen), j.ring.size/2)
	if seed { // the queued entries are in the cache, and so in the seed
		for all := j.c.journalSeed(j.ring.size / 2); len(all) > 0; {
			n, total := 0, int64(0)
			for n < len(all) && total+int64(journalRecordLen(all[n].e)) <= limit {
				total += int64(journalRecordLen(all[n].e))
				n++
			}
			if err := j.writeBatch(all[:n]); err != nil {
				return err
			}
			all = all[n:]
		}
		return nil
	}
	batch := append(append(j.work[:0], j.again...), pending...)
	clear(j.again)
	j.again = keepEntries(j.again)
	defer func() {
		clear(batch)
		j.work = keepEntries(batch)
	}()
	from, total := len(batch), int64(0)
	for from > 0 && total+int64(journalRecordLen(batch[from-1].e)) <= limit {
		total += int64(journalRecordLen(batch[from-1].e))
		from--
	}
	j.drops.Add(int64(from))
	return j.writeBatch(batch[from:])
}

// keepEntries returns s emptied for use again, or nil when its array is
// larger than is worth keeping. The caller has cleared it.
func keepEntries(s []pendingEntry) []pendingEntry {
	if cap(s) > journalKeepEntries {
		return nil
	}
	return s[:0]
}

// journalSeed returns the cache's fresh entries, the most recently used
// within maxBytes of records, oldest first and the shards interleaved.
func (c *Cache) journalSeed(maxBytes int64) []pendingEntry {
	now := c.cfg.Now()
	var out []pendingEntry
	var total int64
	c.eachRecent(func(e *entry) bool {
		if !e.fresh(now) {
			return true
		}
		if total += int64(journalRecordLen(e)); total > maxBytes {
			return false
		}
		k := e.key()
		out = append(out, pendingEntry{e: e, h: k.Hash(c.seed)})
		return true
	})
	for l, r := 0, len(out)-1; l < r; l, r = l+1, r-1 {
		out[l], out[r] = out[r], out[l]
	}
	return out
}
