package kubezone

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/nodecache/nodecache/pkg/logkey"
)

// Snapshot file layout: magic (8 bytes) | version (uint32, big endian) |
// payload length (uint64) | SHA-256 of the payload | payload, where the
// payload is gzip-compressed JSON of snapshotData.
const (
	snapMagic   = "NCZONE\x00\x01"
	snapVersion = 1
	snapHeader  = 8 + 4 + 8 + sha256.Size
	// maxSnapFile caps the file read, maxSnapSize the JSON decompressed from
	// it (a gzip bomb stops there): both far above a large cluster's zone
	// (10,000 services and their slices: a few MiB compressed).
	maxSnapFile = 64 << 20
	maxSnapSize = 256 << 20
)

// ErrSnapshotInvalid is wrapped by LoadSnapshot for a corrupt, truncated,
// foreign (other domain or format) snapshot. Nothing of it is loaded.
var ErrSnapshotInvalid = errors.New("invalid zone snapshot")

// ErrSnapshotTooOld is wrapped by LoadSnapshot for a snapshot written longer
// than Config.SnapshotMaxAge ago. Nothing of it is loaded.
var ErrSnapshotTooOld = errors.New("zone snapshot too old")

// snapshotData is the persisted source of the zone.
type snapshotData struct {
	Domain     string        `json:"domain"`
	Written    time.Time     `json:"written"`
	Namespaces []string      `json:"namespaces"`
	Services   []*svcModel   `json:"services"`
	Slices     []*sliceModel `json:"slices"`
	Pods       []*podModel   `json:"pods,omitempty"`
}

// LoadSnapshot loads Config.SnapshotPath into an unsynced zone, which then
// answers from it (Source "snapshot") until the informers sync; objects the
// API server no longer has are dropped then. A missing file returns an
// error wrapping fs.ErrNotExist; a corrupt or foreign one is refused whole,
// logged once and returned wrapping ErrSnapshotInvalid.
func (z *Zone) LoadSnapshot() error {
	if z.cfg.SnapshotPath == "" {
		return errors.New("loading snapshot: no snapshot path configured")
	}
	raw, err := readBounded(z.cfg.SnapshotPath, maxSnapFile)
	if err != nil {
		return fmt.Errorf("loading snapshot: %w", err)
	}
	data, err := decodeSnapshot(raw, z.cfg.Domain)
	if err == nil {
		err = checkSnapshot(data)
		if err != nil {
			err = fmt.Errorf("%w: %w", ErrSnapshotInvalid, err)
		}
	}
	if err == nil {
		if age := snapshotAge(data.Written, z.now()); age > z.cfg.SnapshotMaxAge {
			err = fmt.Errorf("%w: written %s ago (at %s), more than the maximum age %s", ErrSnapshotTooOld,
				age.Round(time.Second), data.Written.Format(time.RFC3339), z.cfg.SnapshotMaxAge)
		}
	}
	if err != nil {
		z.snapRefused.Store(&snapRefusal{err: err.Error()})
		z.log.Warn("refusing zone snapshot", "path", z.cfg.SnapshotPath, logkey.Err, err)
		return fmt.Errorf("loading snapshot %s: %w", z.cfg.SnapshotPath, err)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.synced.Load() {
		return errors.New("loading snapshot: zone already synced from the API server")
	}
	b := newBatch()
	b.all = true
	for _, ns := range data.Namespaces {
		z.applyEventLocked(event{kind: objNamespace, key: ns, obj: nsPresent{snap: true}}, b)
	}
	for _, s := range data.Services {
		s.snap = true
		z.applyEventLocked(event{kind: objService, key: s.key(), obj: s}, b)
	}
	for _, s := range data.Slices {
		s.snap = true
		z.applyEventLocked(event{kind: objSlice, key: s.key(), obj: s}, b)
	}
	for _, p := range data.Pods {
		p.snap = true
		z.applyEventLocked(event{kind: objPod, key: p.key(), obj: p}, b)
	}
	z.snapWritten.Store(data.Written.UnixNano())
	z.publishLocked(b)
	z.setSource(SourceSnapshot)
	z.log.Info("serving zone from snapshot", "path", z.cfg.SnapshotPath, "written", data.Written,
		"services", len(data.Services))
	return nil
}

// readBounded reads the file at path, refusing one larger than limit.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("%w: %s is larger than %d MiB", ErrSnapshotInvalid, path, limit>>20)
	}
	return raw, nil
}

// snapRefusal records why the snapshot was not loaded, for readiness.
type snapRefusal struct{ err string }

// SnapshotProblem says why the zone does not answer from its snapshot
// although it has not synced: the snapshot was refused (too old, corrupt),
// or it was loaded but is older than Config.SnapshotMaxAge now. It is ""
// once synced, while the snapshot is young enough, or without a snapshot.
func (z *Zone) SnapshotProblem() string {
	if z.synced.Load() {
		return ""
	}
	if w := z.snapWritten.Load(); w != 0 {
		if age := snapshotAge(time.Unix(0, w), z.now()); age > z.cfg.SnapshotMaxAge {
			return fmt.Sprintf("snapshot written %s ago is past the maximum age %s: cluster names get SERVFAIL until the API server answers",
				age.Round(time.Second), z.cfg.SnapshotMaxAge)
		}
		return ""
	}
	if r := z.snapRefused.Load(); r != nil {
		return "snapshot refused: " + r.err
	}
	return ""
}

// snapshotStale reports an unsynced zone serving a snapshot past its
// maximum age: it then answers SERVFAIL for every cluster name.
func (z *Zone) snapshotStale() bool {
	if z.synced.Load() {
		return false
	}
	w := z.snapWritten.Load()
	return w != 0 && snapshotAge(time.Unix(0, w), z.now()) > z.cfg.SnapshotMaxAge
}

func decodeSnapshot(raw []byte, domain string) (*snapshotData, error) {
	if len(raw) < snapHeader || string(raw[:8]) != snapMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrSnapshotInvalid)
	}
	if v := binary.BigEndian.Uint32(raw[8:12]); v != snapVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrSnapshotInvalid, v, snapVersion)
	}
	n := binary.BigEndian.Uint64(raw[12:20])
	payload := raw[snapHeader:]
	if uint64(len(payload)) != n {
		return nil, fmt.Errorf("%w: payload is %d bytes, header says %d", ErrSnapshotInvalid, len(payload), n)
	}
	if sum := sha256.Sum256(payload); !bytes.Equal(sum[:], raw[20:snapHeader]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrSnapshotInvalid)
	}
	gz, err := gzip.NewReader(bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSnapshotInvalid, err)
	}
	var data snapshotData
	if err := json.NewDecoder(io.LimitReader(gz, maxSnapSize)).Decode(&data); err != nil {
		return nil, fmt.Errorf("%w: decoding: %w", ErrSnapshotInvalid, err)
	}
	if data.Domain != domain {
		return nil, fmt.Errorf("%w: domain %q, want %q", ErrSnapshotInvalid, data.Domain, domain)
	}
	return &data, nil
}

// snapshotLocked collects the models to persist. The caller holds mu;
// models are immutable, so encoding can happen after unlocking.
func (z *Zone) snapshotLocked() *snapshotData {
	st := z.st
	data := snapshotData{Domain: z.cfg.Domain, Written: z.now().UTC(), Namespaces: sortedKeys(st.namespaces)}
	for _, k := range sortedKeys(st.services) {
		data.Services = append(data.Services, st.services[k])
	}
	for _, k := range sortedKeys(st.slices) {
		data.Slices = append(data.Slices, st.slices[k])
	}
	if z.cfg.Pods == PodsVerified {
		for _, k := range sortedKeys(st.pods) {
			data.Pods = append(data.Pods, st.pods[k])
		}
	}
	return &data
}

// encodeSnapshot serializes data in the snapshot file format.
func encodeSnapshot(data *snapshotData) ([]byte, error) {
	var payload bytes.Buffer
	gz := gzip.NewWriter(&payload)
	if err := json.NewEncoder(gz).Encode(data); err != nil {
		return nil, fmt.Errorf("encoding snapshot: %w", err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("compressing snapshot: %w", err)
	}
	return framePayload(payload.Bytes()), nil
}

// framePayload puts the header (magic, version, length, checksum) before a
// compressed payload.
func framePayload(payload []byte) []byte {
	out := make([]byte, snapHeader, snapHeader+len(payload))
	copy(out, snapMagic)
	binary.BigEndian.PutUint32(out[8:], snapVersion)
	binary.BigEndian.PutUint64(out[12:], uint64(len(payload)))
	sum := sha256.Sum256(payload)
	copy(out[20:], sum[:])
	return append(out, payload...)
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory: write, fsync, rename, fsync the directory.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("creating temporary snapshot: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing snapshot %s: %w", path, err)
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync() // best effort: the rename is already visible
		_ = d.Close()
	}
	return nil
}

// writeSnapshot persists the zone if it changed since the last write and
// its data comes from the API server. A failure (disk full) is logged once
// until a write succeeds again; the zone keeps serving either way.
func (z *Zone) writeSnapshot(failing *bool) {
	z.mu.Lock()
	if !z.snapDirty || !z.synced.Load() {
		z.mu.Unlock()
		return
	}
	data := z.snapshotLocked()
	z.snapDirty = false
	z.mu.Unlock()
	raw, err := encodeSnapshot(data)
	if err == nil {
		err = writeFileAtomic(z.cfg.SnapshotPath, raw)
	}
	if err != nil {
		z.met.snapWrites.WithLabelValues("error").Inc()
		z.mu.Lock()
		z.snapDirty = true // retry at the next tick
		z.mu.Unlock()
		if !*failing {
			z.log.Error("writing zone snapshot failed; still serving, will retry", logkey.Err, err)
			*failing = true
		}
		return
	}
	z.met.snapWrites.WithLabelValues("ok").Inc()
	if *failing {
		z.log.Info("writing zone snapshot works again", "path", z.cfg.SnapshotPath)
		*failing = false
	}
}

// snapshotLoop writes the snapshot as soon as the first sync is applied
// (synced closed), so that a process that crashes in its first interval
// leaves one for the next, then at most once per SnapshotInterval, and
// once more on shutdown.
func (z *Zone) snapshotLoop(ctx context.Context, synced <-chan struct{}) {
	t := time.NewTicker(z.cfg.SnapshotInterval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-synced:
			synced = nil
			z.writeSnapshot(&failing)
		case <-ctx.Done():
			z.writeSnapshot(&failing)
			return
		case <-t.C:
			z.writeSnapshot(&failing)
		}
	}
}
