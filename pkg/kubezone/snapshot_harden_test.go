package kubezone

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
)

// frameSnapshot wraps a JSON payload in the snapshot file format, as
// encodeSnapshot does, so that checks past the checksum can be reached.
func frameSnapshot(payload []byte) []byte {
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write(payload)
	_ = w.Close()
	return framePayload(gz.Bytes())
}

// webSnapshot is a valid snapshot of one service, written at written.
func webSnapshot(written time.Time) *snapshotData {
	return &snapshotData{Domain: "cluster.local.", Written: written, Namespaces: []string{"demo"},
		Services: []*svcModel{{Namespace: "demo", Name: "web", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.20")},
			Ports: []portModel{{Name: "http", Protocol: "tcp", Port: 80}}}}}
}

func loadFile(t *testing.T, raw []byte, cfg Config) (*Zone, error) {
	t.Helper()
	cfg.SnapshotPath = filepath.Join(t.TempDir(), "zone.snap")
	if err := os.WriteFile(cfg.SnapshotPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	z, _ := newZone(t, cfg)
	return z, z.LoadSnapshot()
}

// TestSnapshotModelsAreChecked: a snapshot holding a model the informers
// could not have produced (a null entry, a name that is no DNS name, an
// address or port that is not one) is refused whole, without a panic.
func TestSnapshotModelsAreChecked(t *testing.T) {
	valid, err := json.Marshal(webSnapshot(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, from, to string }{
		{"null service", `"services":[`, `"services":[null,`},
		{"null slice", `"slices":null`, `"slices":[null]`},
		{"null pod", `"services":[`, `"pods":[null],"services":[`},
		{"service name with a dot", `"name":"web"`, `"name":"we.b"`},
		{"upper-case namespace", `"namespaces":["demo"]`, `"namespaces":["Demo"]`},
		{"IPv4-mapped cluster IP", `"10.96.0.20"`, `"::ffff:10.96.0.20"`},
		{"port protocol", `"proto":"tcp"`, `"proto":"icmp"`},
		{"port zero", `"port":80`, `"port":0`},
		{"external name not a FQDN", `"ips":["10.96.0.20"]`, `"externalName":"Example.COM"`},
		{"slice endpoint host name", `"slices":null`, `"slices":[{"ns":"demo","name":"web-1","svc":"web","eps":[{"addr":"10.1.0.1","host":"a.b"}]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			payload := strings.Replace(string(valid), tt.from, tt.to, 1)
			if payload == string(valid) {
				t.Fatalf("mutation %q found nothing to replace", tt.from)
			}
			z, err := loadFile(t, frameSnapshot([]byte(payload)), Config{})
			if !errors.Is(err, ErrSnapshotInvalid) {
				t.Fatalf("LoadSnapshot: got %v, want ErrSnapshotInvalid", err)
			}
			if z.Source() != SourceNone || !strings.Contains(z.SnapshotProblem(), "snapshot refused") {
				t.Errorf("after the refusal: got source %q, problem %q; want none and the reason", z.Source(), z.SnapshotProblem())
			}
		})
	}
	if _, err := loadFile(t, frameSnapshot(valid), Config{}); err != nil {
		t.Errorf("the unmutated snapshot: got %v, want it loaded", err)
	}
}

// TestSnapshotMaxAge: a snapshot older than the maximum age is not loaded;
// one that ages past it while the API server stays away stops answering:
// SERVFAIL for every cluster name instead of NXDOMAIN for the ones it lacks.
func TestSnapshotMaxAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		raw, err := encodeSnapshot(webSnapshot(time.Now().Add(-2 * time.Hour)))
		if err != nil {
			t.Fatal(err)
		}
		z, err := loadFile(t, raw, Config{})
		if !errors.Is(err, ErrSnapshotTooOld) {
			t.Fatalf("LoadSnapshot of a 2h old snapshot: got %v, want ErrSnapshotTooOld", err)
		}
		if p := z.SnapshotProblem(); !strings.Contains(p, "maximum age") {
			t.Errorf("SnapshotProblem: got %q, want the age named", p)
		}
		checkAnswer(t, "too old to load", z.Lookup("new.demo.svc.cluster.local.", dns.TypeA), dns.RcodeServerFailure, nil, false, "")

		raw, err = encodeSnapshot(webSnapshot(time.Now().Add(-50 * time.Minute)))
		if err != nil {
			t.Fatal(err)
		}
		z, err = loadFile(t, raw, Config{})
		if err != nil {
			t.Fatalf("LoadSnapshot of a 50m old snapshot: %v", err)
		}
		checkAnswer(t, "young snapshot", z.Lookup("web.demo.svc.cluster.local.", dns.TypeA), dns.RcodeSuccess,
			[]string{"web.demo.svc.cluster.local. A 10.96.0.20"}, false, "")
		checkAnswer(t, "young snapshot", z.Lookup("new.demo.svc.cluster.local.", dns.TypeA), nx, nil, true, "")
		gen := z.Generation()

		time.Sleep(11 * time.Minute) // the API server is still away
		for _, q := range []string{"web.demo.svc.cluster.local.", "new.demo.svc.cluster.local."} {
			checkAnswer(t, "aged past the maximum", z.Lookup(q, dns.TypeA), dns.RcodeServerFailure, nil, false, "")
		}
		if z.Generation() == gen {
			t.Error("generation after the snapshot aged out: unchanged, want a new one (memoized answers must not be served)")
		}
		if p := z.SnapshotProblem(); !strings.Contains(p, "past the maximum age") {
			t.Errorf("SnapshotProblem: got %q, want it to say the snapshot aged out", p)
		}
	})
}

// TestSnapshotReadIsBounded: a file larger than the cap is refused
// without being read whole.
func TestSnapshotReadIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "zone.snap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxSnapFile + 1); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	_ = f.Close()
	z, _ := newZone(t, Config{SnapshotPath: path})
	if err := z.LoadSnapshot(); !errors.Is(err, ErrSnapshotInvalid) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("LoadSnapshot of a %d MiB file: got %v, want ErrSnapshotInvalid saying it is too large", (maxSnapFile+1)>>20, err)
	}
}

// FuzzLoadSnapshot loads arbitrary files (wrap false) and arbitrary JSON
// payloads in a valid frame (wrap true): LoadSnapshot loads or refuses,
// never panics, and a loaded zone answers and lists without panicking.
func FuzzLoadSnapshot(f *testing.F) {
	valid, _ := json.Marshal(webSnapshot(time.Now()))
	raw, _ := encodeSnapshot(webSnapshot(time.Now()))
	f.Add(false, raw)
	f.Add(true, valid)
	f.Add(true, []byte(`{"domain":"cluster.local.","services":[null]}`))
	f.Add(true, []byte(`{"domain":"cluster.local.","slices":[{"ns":"demo","name":"s","svc":"web","eps":[{"addr":"10.0.0.1","host":"h"}],"ports":[{"name":"p","proto":"udp","port":53}]}]}`))
	f.Fuzz(func(t *testing.T, wrap bool, in []byte) {
		if wrap {
			in = frameSnapshot(in)
		}
		path := filepath.Join(t.TempDir(), "zone.snap")
		if err := os.WriteFile(path, in, 0o600); err != nil {
			t.Fatal(err)
		}
		z, err := New(Config{SnapshotPath: path, SnapshotMaxAge: 1 << 62}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := z.LoadSnapshot(); err != nil {
			if !errors.Is(err, ErrSnapshotInvalid) && !errors.Is(err, ErrSnapshotTooOld) {
				t.Fatalf("LoadSnapshot: got %v, want nil, ErrSnapshotInvalid or ErrSnapshotTooOld", err)
			}
			return
		}
		for _, q := range []string{"web.demo.svc.cluster.local.", "_p._udp.web.demo.svc.cluster.local.", "h.web.demo.svc.cluster.local.",
			"1.0.0.10.in-addr.arpa.", "cluster.local."} {
			for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeANY} {
				_ = z.Lookup(q, qt)
			}
		}
		_ = z.List("")
	})
}
