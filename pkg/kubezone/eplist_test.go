package kubezone

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// oldSnapshotJSON is the snapshot payload of a zone with IPv4, IPv6, named,
// unnamed and empty slices, as written by the version that held endpoints
// as []epModel (before epList): captured from that code. Agents of both
// versions must read each other's snapshots during a rolling upgrade.
const oldSnapshotJSON = `{"domain":"cluster.local.","written":"2026-11-30T12:00:00Z","namespaces":["ns"],` +
	`"services":[{"ns":"ns","name":"db","headless":true,"ports":[{"name":"sql","proto":"tcp","port":5432}]},` +
	`{"ns":"ns","name":"web","ips":["10.96.0.10","fd00::10"],"ports":[{"name":"http","proto":"tcp","port":80}]}],` +
	`"slices":[{"ns":"ns","name":"db-v4","svc":"db","ports":[{"name":"http","proto":"tcp","port":8080}],` +
	`"eps":[{"addr":"10.0.0.1","host":"db-0"},{"addr":"10.0.0.2","host":"db-1"},{"addr":"10.0.0.3"}]},` +
	`{"ns":"ns","name":"db-v6","svc":"db","ports":[{"name":"http","proto":"tcp","port":8080}],` +
	`"eps":[{"addr":"fd00::1","host":"db-0"},{"addr":"fd00::2"}]},` +
	`{"ns":"ns","name":"web-v4","svc":"web","ports":[{"name":"http","proto":"tcp","port":8080}],` +
	`"eps":[{"addr":"10.0.1.1"},{"addr":"10.0.1.2"}]},` +
	`{"ns":"ns","name":"web-v6","svc":"web","ports":[{"name":"http","proto":"tcp","port":8080}],"eps":[{"addr":"fd00::5"}]},` +
	`{"ns":"ns","name":"web-empty","svc":"web"}]}`

// oldSnapshotRecords are the records the version before epList served from
// oldSnapshotJSON (List("") without the SOA), captured from that code.
var oldSnapshotRecords = []string{
	"0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa. PTR web.ns.svc.cluster.local.",
	"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa. PTR db-0.db.ns.svc.cluster.local.",
	"1.0.0.10.in-addr.arpa. PTR db-0.db.ns.svc.cluster.local.",
	"1.1.0.10.in-addr.arpa. PTR 10-0-1-1.web.ns.svc.cluster.local.",
	"10-0-0-3.db.ns.svc.cluster.local. A 10.0.0.3",
	"10-0-1-1.web.ns.svc.cluster.local. A 10.0.1.1",
	"10-0-1-2.web.ns.svc.cluster.local. A 10.0.1.2",
	"10.0.96.10.in-addr.arpa. PTR web.ns.svc.cluster.local.",
	"2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa. PTR fd00--2.db.ns.svc.cluster.local.",
	"2.0.0.10.in-addr.arpa. PTR db-1.db.ns.svc.cluster.local.",
	"2.1.0.10.in-addr.arpa. PTR 10-0-1-2.web.ns.svc.cluster.local.",
	"3.0.0.10.in-addr.arpa. PTR 10-0-0-3.db.ns.svc.cluster.local.",
	"5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa. PTR fd00--5.web.ns.svc.cluster.local.",
	"_http._tcp.db.ns.svc.cluster.local. SRV 0 25 8080 10-0-0-3.db.ns.svc.cluster.local.",
	"_http._tcp.db.ns.svc.cluster.local. SRV 0 25 8080 db-0.db.ns.svc.cluster.local.",
	"_http._tcp.db.ns.svc.cluster.local. SRV 0 25 8080 db-1.db.ns.svc.cluster.local.",
	"_http._tcp.db.ns.svc.cluster.local. SRV 0 25 8080 fd00--2.db.ns.svc.cluster.local.",
	"_http._tcp.web.ns.svc.cluster.local. SRV 0 100 80 web.ns.svc.cluster.local.",
	"cluster.local. NS ns.dns.cluster.local.",
	"db-0.db.ns.svc.cluster.local. A 10.0.0.1",
	"db-0.db.ns.svc.cluster.local. AAAA fd00::1",
	"db-1.db.ns.svc.cluster.local. A 10.0.0.2",
	"db.ns.svc.cluster.local. A 10.0.0.1",
	"db.ns.svc.cluster.local. A 10.0.0.2",
	"db.ns.svc.cluster.local. A 10.0.0.3",
	"db.ns.svc.cluster.local. AAAA fd00::1",
	"db.ns.svc.cluster.local. AAAA fd00::2",
	"db.ns.svc.cluster.local. SRV 0 25 8080 10-0-0-3.db.ns.svc.cluster.local.",
	"db.ns.svc.cluster.local. SRV 0 25 8080 db-0.db.ns.svc.cluster.local.",
	"db.ns.svc.cluster.local. SRV 0 25 8080 db-1.db.ns.svc.cluster.local.",
	"db.ns.svc.cluster.local. SRV 0 25 8080 fd00--2.db.ns.svc.cluster.local.",
	"dns-version.cluster.local. TXT \"1.1.0\"",
	"fd00--2.db.ns.svc.cluster.local. AAAA fd00::2",
	"fd00--5.web.ns.svc.cluster.local. AAAA fd00::5",
	"web.ns.svc.cluster.local. A 10.96.0.10",
	"web.ns.svc.cluster.local. AAAA fd00::10",
	"web.ns.svc.cluster.local. SRV 0 100 80 web.ns.svc.cluster.local.",
}

func TestOldSnapshotFormat(t *testing.T) {
	var data snapshotData
	if err := json.Unmarshal([]byte(oldSnapshotJSON), &data); err != nil {
		t.Fatalf("decoding the old format: %v", err)
	}
	again, err := json.Marshal(&data)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != oldSnapshotJSON {
		t.Errorf("re-encoded snapshot differs from the old format:\ngot  %s\nwant %s", again, oldSnapshotJSON)
	}

	raw, err := encodeSnapshot(&data)
	if err != nil {
		t.Fatal(err)
	}
	// The format test's snapshot has a fixed write time: no age limit here.
	cfg := Config{SnapshotPath: filepath.Join(t.TempDir(), "zone.snap"), SnapshotMaxAge: 100 * 365 * 24 * time.Hour}
	if err := writeFileAtomic(cfg.SnapshotPath, raw); err != nil {
		t.Fatal(err)
	}
	z, _ := newZone(t, cfg)
	if err := z.LoadSnapshot(); err != nil {
		t.Fatalf("LoadSnapshot: %v", err)
	}
	var got []string
	for _, r := range listWithoutSOA(z) {
		got = append(got, fmt.Sprintf("%s %s %s", r.Name, r.Type, r.Data))
	}
	if g, w := strings.Join(got, "\n"), strings.Join(oldSnapshotRecords, "\n"); g != w {
		t.Errorf("records from the old snapshot:\ngot\n%s\nwant\n%s", g, w)
	}
}

// TestEPListReadsBack checks that an epList gives back exactly the
// endpoints it was built from, in order, whichever form it stores them in.
func TestEPListReadsBack(t *testing.T) {
	for _, c := range []struct {
		name string
		eps  []epModel
		form string
	}{
		{"empty", nil, "empty"},
		{"IPv4 without hostnames", []epModel{epAt("10.0.0.2", ""), epAt("10.0.0.1", "")}, "v4"},
		{"IPv4 with a hostname", []epModel{epAt("10.0.0.2", ""), epAt("10.0.0.1", "h")}, "v4+hosts"},
		{"IPv6", []epModel{epAt("fd00::1", "")}, "wide"},
		{"mixed families", []epModel{epAt("10.0.0.1", "a"), epAt("fd00::1", "")}, "wide+hosts"},
		{"IPv4-mapped, zoned and invalid", []epModel{epAt("::ffff:10.0.0.1", ""), epAt("fe80::1%eth0", ""), {}}, "wide"},
	} {
		l := newEPList(c.eps)
		form := map[bool]string{true: "v4", false: "wide"}[l.v4 != nil]
		if l.len() == 0 {
			form = "empty"
		}
		if l.hosts != nil {
			form += "+hosts"
		}
		if form != c.form {
			t.Errorf("%s: stored as %s, want %s", c.name, form, c.form)
		}
		if got := l.models(); !slices.Equal(got, c.eps) {
			t.Errorf("%s: got %v, want %v", c.name, got, c.eps)
		}
		if l.IsZero() != (len(c.eps) == 0) {
			t.Errorf("%s: IsZero: got %v with %d endpoints", c.name, l.IsZero(), len(c.eps))
		}
	}
}
