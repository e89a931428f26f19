package kubezone

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// listWithoutSOA is List("") minus the SOA (its serial differs per zone).
func listWithoutSOA(z *Zone) []Record {
	var out []Record
	for _, r := range z.List("") {
		if r.Type != "SOA" {
			out = append(out, r)
		}
	}
	return out
}

// writeFixtureSnapshot runs a zone on the fixture until it wrote its
// snapshot to path, and returns that zone's records.
func writeFixtureSnapshot(t testing.TB, cfg Config) []Record {
	t.Helper()
	client := fixtureClient(t, fixturePath)
	z, _ := newZone(t, cfg)
	runZone(t, z, client)
	time.Sleep(cfg.SnapshotInterval + time.Second)
	synctest.Wait()
	if got := testutil.ToFloat64(z.met.snapWrites.WithLabelValues("ok")); got != 1 {
		t.Fatalf("snapshot writes ok: got %v, want 1", got)
	}
	return listWithoutSOA(z)
}

func TestSnapshotRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := fixtureConfig()
		cfg.Pods = PodsVerified
		cfg.SnapshotPath = filepath.Join(t.TempDir(), "zone.snap")
		cfg.SnapshotInterval = 10 * time.Second
		want := writeFixtureSnapshot(t, cfg)

		z, _ := newZone(t, cfg)
		if err := z.LoadSnapshot(); err != nil {
			t.Fatalf("LoadSnapshot: %v", err)
		}
		if z.Source() != SourceSnapshot || z.Synced() {
			t.Errorf("after LoadSnapshot: got source %q synced %v, want snapshot, false", z.Source(), z.Synced())
		}
		got := listWithoutSOA(z)
		if len(got) != len(want) {
			t.Fatalf("records from snapshot: got %d, want %d", len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("record %d: got %+v, want %+v", i, got[i], want[i])
			}
		}
		checkAnswer(t, "snapshot is authoritative", z.Lookup("nope.demo.svc.cluster.local.", dns.TypeA), nx, nil, true, "")

		// The API server comes back without the web service: the sync drops it.
		client := fixtureClient(t, fixturePath)
		if err := client.CoreV1().Services("demo").Delete(t.Context(), "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		runZone(t, z, client)
		if z.Source() != SourceAPI || !z.Synced() {
			t.Errorf("after sync: got source %q synced %v, want api, true", z.Source(), z.Synced())
		}
		checkAnswer(t, "service gone from the API", z.Lookup("web.demo.svc.cluster.local.", dns.TypeA), nx, nil, true, "")
		checkAnswer(t, "service still in the API", z.Lookup("db-0.db.demo.svc.cluster.local.", dns.TypeA), ok,
			[]string{"db-0.db.demo.svc.cluster.local. A 10.244.1.30"}, false, "")
	})
}

func TestSnapshotRefused(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.snap")
	synctest.Test(t, func(t *testing.T) {
		cfg := fixtureConfig()
		cfg.SnapshotPath, cfg.SnapshotInterval = good, 10*time.Second
		writeFixtureSnapshot(t, cfg)
	})
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x40
		return b
	}
	cases := []struct {
		name   string
		data   []byte
		domain string
	}{
		{"bad magic", flip(0), ""},
		{"other version", flip(11), ""},
		{"payload byte flipped", flip(len(raw) - 10), ""},
		{"checksum flipped", flip(25), ""},
		{"truncated", raw[:len(raw)-1], ""},
		{"empty", nil, ""},
		{"foreign domain", raw, "other.local."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "zone.snap")
			if err := os.WriteFile(path, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			z, logs := newZone(t, Config{SnapshotPath: path, Domain: c.domain})
			err := z.LoadSnapshot()
			if !errors.Is(err, ErrSnapshotInvalid) {
				t.Errorf("LoadSnapshot: got %v, want ErrSnapshotInvalid", err)
			}
			if z.Source() != SourceNone || z.Stats().Services != 0 {
				t.Errorf("refused snapshot: got source %q, want none and nothing loaded", z.Source())
			}
			if n := strings.Count(logs.String(), "\n"); n != 1 {
				t.Errorf("log lines: got %d, want 1", n)
			}
		})
	}
	z, _ := newZone(t, Config{SnapshotPath: filepath.Join(dir, "missing.snap")})
	if err := z.LoadSnapshot(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing snapshot: got %v, want ErrNotExist", err)
	}
}

// TestSnapshotWriteFailure: a failing write (here: no such directory, as
// for a full disk) is logged once, counted, retried, and the zone serves.
func TestSnapshotWriteFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := fixtureConfig()
		cfg.SnapshotPath = filepath.Join(t.TempDir(), "missing-dir", "zone.snap")
		cfg.SnapshotInterval = 10 * time.Second
		client := fixtureClient(t, fixturePath)
		z, logs := newZone(t, cfg)
		runZone(t, z, client)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := testutil.ToFloat64(z.met.snapWrites.WithLabelValues("error")); got < 2 {
			t.Errorf("snapshot write errors: got %v, want >= 2 (retried)", got)
		}
		if n := strings.Count(logs.String(), "writing zone snapshot failed"); n != 1 {
			t.Errorf("failure log lines: got %d, want 1", n)
		}
		checkAnswer(t, "still serving", z.Lookup("web.demo.svc.cluster.local.", dns.TypeA), ok,
			[]string{"web.demo.svc.cluster.local. A 10.96.0.10"}, false, "")
	})
}

// TestSnapshotWithDeadAPIServer: loaded at start while the API server is
// unreachable, the snapshot is served (authoritatively) for as long as the
// outage lasts.
func TestSnapshotWithDeadAPIServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := fixtureConfig()
		cfg.SnapshotPath = filepath.Join(t.TempDir(), "zone.snap")
		cfg.SnapshotInterval = 10 * time.Second
		writeFixtureSnapshot(t, cfg)

		z, _ := newZone(t, cfg)
		if err := z.LoadSnapshot(); err != nil {
			t.Fatalf("LoadSnapshot: %v", err)
		}
		client := fake.NewClientset()
		client.PrependReactor("list", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("connection refused")
		})
		runZone(t, z, client)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if z.Synced() || z.Source() != SourceSnapshot {
			t.Errorf("got synced %v source %q, want false, snapshot", z.Synced(), z.Source())
		}
		checkAnswer(t, "from the snapshot", z.Lookup("web.demo.svc.cluster.local.", dns.TypeA), ok,
			[]string{"web.demo.svc.cluster.local. A 10.96.0.10"}, false, "")
		checkAnswer(t, "authoritative NXDOMAIN", z.Lookup("nope.demo.svc.cluster.local.", dns.TypeA), nx, nil, true, "")
		if got := testutil.ToFloat64(z.met.snapWrites.WithLabelValues("ok")); got != 0 {
			t.Errorf("snapshot rewritten from a snapshot: got %v writes, want 0", got)
		}
	})
}

// TestSnapshotWrittenAtFirstSync: the first snapshot is written as soon as
// the zone syncs, not an interval later, so that a process that crashes
// early leaves one for the next to serve from.
func TestSnapshotWrittenAtFirstSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := fixtureConfig()
		cfg.SnapshotPath = filepath.Join(t.TempDir(), "zone.snap")
		cfg.SnapshotInterval = time.Hour
		client := fixtureClient(t, fixturePath)
		z, _ := newZone(t, cfg)
		runZone(t, z, client)
		synctest.Wait()
		if got := testutil.ToFloat64(z.met.snapWrites.WithLabelValues("ok")); got != 1 {
			t.Errorf("snapshot writes right after the first sync: got %v, want 1", got)
		}
		next, _ := newZone(t, cfg)
		if err := next.LoadSnapshot(); err != nil || next.Source() != SourceSnapshot {
			t.Errorf("LoadSnapshot of it: err %v, source %q; want the snapshot loaded", err, next.Source())
		}
	})
}
