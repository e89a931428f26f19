package cache

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodecache/nodecache/pkg/logkey"
)

// The journal keeps a copy of the cache outside the process, in a file
// another process holds (a memfd the supervisor keeps), so that a process
// killed at any moment restarts warm. It costs the hit path nothing: only
// an insert (a miss) queues its entry, and a goroutine of its own appends
// the queued records in batches. When the file has grown to twice what it
// held after the last compaction (or past JournalConfig.MaxBytes), that
// goroutine writes the live entries to a new file and publishes it, so the
// work of compacting is proportional to what was inserted.
//
// The file: journalMagic and journalVersion, then records as in the
// handover stream (a big-endian uint32 length, the record), oldest first,
// with no end marker: a process killed in the middle of a write leaves a
// torn last record, which ImportJournal ignores.
const (
	journalMagic   = "NCJRNL\x00"
	journalVersion = 1
	journalHdrLen  = int64(len(journalMagic) + 1)

	journalDelay      = 20 * time.Millisecond // how long queued inserts wait to be written together
	journalMaxPending = 1 << 16               // queued entries beyond this are dropped, and the next batch compacts
	journalMinCompact = 4 << 20               // no compaction below this size
)

// JournalConfig says where the journal goes.
type JournalConfig struct {
	// File is the journal to append to: one ImportJournal read (at Size), or
	// nil to start with a compaction into a file from NewFile.
	File *os.File
	// Size is where File's whole records end (ImportJournal's end).
	Size int64
	// MaxBytes bounds the file; zero: the cache's MaxBytes. A compaction
	// keeps the most recently used entries within half of it.
	MaxBytes int64
	// NewFile returns a new, empty file for a compaction.
	NewFile func() (*os.File, error)
	// Publish is given every file the journal starts writing, before the
	// one before it is closed; an error stops the journal.
	Publish func(*os.File) error
}

// JournalStats are the journal's figures.
type JournalStats struct {
	Bytes       int64  // the current file's size
	Records     uint64 // records appended since start, compactions included
	Compactions uint64
	Dropped     uint64 // inserts not queued (the writer behind); each forces a compaction
}

// Journal is a running journal; Close stops it.
type Journal struct {
	c   *Cache
	cfg JournalConfig

	mu      sync.Mutex // guards following
	pending []*entry
	dropped bool // an insert was not queued: the file misses it until a compaction

	kick   chan struct{} // cap 1: pending became non-empty
	cancel context.CancelFunc
	done   chan struct{}
	err    error // the writer's end; read after done

	// Owned by the writer goroutine.
	file     *os.File
	size     int64
	lastSize int64 // size after the last compaction
	buf      []byte

	bytes, records, compactions, drops atomic.Int64
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
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = c.cfg.MaxBytes
	}
	j := &Journal{c: c, cfg: cfg, kick: make(chan struct{}, 1), done: make(chan struct{}),
		file: cfg.File, size: cfg.Size, lastSize: cfg.Size}
	if j.file == nil {
		j.dropped = true // compact first: the file is written from the cache as it is
	} else if err := cfg.Publish(j.file); err != nil {
		return nil, fmt.Errorf("cache journal: publishing %s: %w", j.file.Name(), err)
	}
	if !c.jnl.CompareAndSwap(nil, j) {
		return nil, errors.New("cache journal: already started")
	}
	j.bytes.Store(j.size)
	return j, nil
}

// add queues e, just stored, for the writer. It never blocks.
func (j *Journal) add(e *entry) {
	j.mu.Lock()
	if len(j.pending) >= journalMaxPending {
		j.dropped = true
		j.mu.Unlock()
		j.drops.Add(1)
		return
	}
	j.pending = append(j.pending, e)
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
	return JournalStats{Bytes: j.bytes.Load(), Records: uint64(j.records.Load()),
		Compactions: uint64(j.compactions.Load()), Dropped: uint64(j.drops.Load())}
}

func (j *Journal) run(ctx context.Context) {
	defer close(j.done)
	defer func() {
		if j.file != nil {
			_ = j.file.Close()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			j.err = j.flush()
			return
		case <-j.kick:
		}
		// Let a burst of misses queue up: one write per batch, at most one
		// wake-up per journalDelay, none while nothing is inserted.
		select {
		case <-ctx.Done():
		case <-time.After(journalDelay):
		}
		if err := j.flush(); err != nil {
			j.err = err
			j.c.log.Error("cache journal stopped: a restart after a crash will start cold", logkey.Err, err)
			j.c.jnl.CompareAndSwap(j, nil)
			return
		}
	}
}

// flush appends the queued entries, or compacts when the file has grown
// enough or missed an insert.
func (j *Journal) flush() error {
	j.mu.Lock()
	batch, dropped := j.pending, j.dropped
	j.pending, j.dropped = nil, false
	j.mu.Unlock()
	if len(batch) == 0 && !dropped {
		return nil
	}
	b := j.buf[:0]
	for _, e := range batch {
		b = binary.BigEndian.AppendUint32(b, uint32(recordLen(e)))
		b = encodeRecord(b, e)
	}
	j.buf = b[:0]
	if cap(j.buf) > 1<<20 {
		j.buf = nil // a flood's buffer is not kept
	}
	if grown := j.size + int64(len(b)); dropped || grown > j.cfg.MaxBytes || grown > max(2*j.lastSize, journalMinCompact) {
		return j.compact() // the batch's entries are in the cache: the compaction writes them
	}
	if _, err := j.file.WriteAt(b, j.size); err != nil {
		return fmt.Errorf("appending to the cache journal: %w", err)
	}
	j.size += int64(len(b))
	j.records.Add(int64(len(batch)))
	j.bytes.Store(j.size)
	return nil
}

// compact writes the cache's fresh entries, oldest first and within half
// of MaxBytes, to a new file, publishes it and closes the old one.
func (j *Journal) compact() error {
	f, err := j.cfg.NewFile()
	if err != nil {
		return fmt.Errorf("compacting the cache journal: %w", err)
	}
	n, size, err := j.c.writeJournal(f, j.cfg.MaxBytes/2)
	if err == nil {
		err = j.cfg.Publish(f)
	}
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("compacting the cache journal: %w", err)
	}
	if j.file != nil {
		_ = j.file.Close()
	}
	j.file, j.size, j.lastSize = f, size, size
	j.records.Add(int64(n))
	j.compactions.Add(1)
	j.bytes.Store(size)
	return nil
}
