package main

import (
	"bytes"
	"strings"
	"testing"
)

const samplePins = `# suite bookworm
# snapshot 20261202T173454Z
iptables 1.8.9-2 amd64 2928d3ca6ca8a3dc3f423f6752822b1f3614a5ba609ff7806bcba4449ffe90e1 debian/pool/main/i/iptables/iptables_1.8.9-2_amd64.deb
netbase 6.4 amd64 29b23c48c0fe6f878e56c5ddc9f65d1c05d729360f3690a593a8c795031cd867 debian/pool/main/n/netbase/netbase_6.4_all.deb
`

func TestPinsRoundTrip(t *testing.T) {
	pf, err := parsePins(strings.NewReader(samplePins), "sample")
	if err != nil {
		t.Fatal(err)
	}
	if pf.Suite != "bookworm" || pf.Snapshot != "20261202T173454Z" || len(pf.Pins) != 2 {
		t.Fatalf("got suite %q snapshot %q %d pins, want bookworm, 20261202T173454Z, 2", pf.Suite, pf.Snapshot, len(pf.Pins))
	}
	var buf bytes.Buffer
	if err := pf.write(&buf); err != nil {
		t.Fatal(err)
	}
	again, err := parsePins(&buf, "written")
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Pins) != 2 || again.Pins[0] != pf.Pins[0] || again.Pins[1] != pf.Pins[1] {
		t.Errorf("written and read back: got %+v, want %+v", again.Pins, pf.Pins)
	}
}

// TestPinsRefuses: a bad line names itself and what is wrong.
func TestPinsRefuses(t *testing.T) {
	const sum = "2928d3ca6ca8a3dc3f423f6752822b1f3614a5ba609ff7806bcba4449ffe90e1"
	for _, tc := range []struct{ line, want string }{
		{"iptables 1.8.9-2 amd64 " + sum, "sample:2: want name version arch sha256 path, got 4 fields"},
		{"iptables 1.8.9-2 amd64 XYZ debian/pool/x.deb", "sample:2: iptables: sha256 \"XYZ\" is not 64 hex digits"},
		{"iptables 1.8.9-2 amd64 " + sum + " ../etc/passwd.deb", "is not a .deb under the mirror"},
		{"iptables 1.8.9-2 amd64 " + sum + " debian/x.deb\niptables 1.8.9-2 amd64 " + sum + " debian/x.deb", "sample:3: iptables is pinned twice for amd64"},
	} {
		_, err := parsePins(strings.NewReader("# suite bookworm\n"+tc.line+"\n"), "sample")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.line, err, tc.want)
		}
	}
	if _, err := parsePins(strings.NewReader("iptables 1 amd64 "+sum+" debian/x.deb\n"), "sample"); err == nil {
		t.Error("no suite line: accepted, want an error")
	}
}

// TestClosure resolves dependencies as update-pins does: first
// alternative the index has, version constraints and :any dropped, the
// configuration-time packages left out.
func TestClosure(t *testing.T) {
	index := map[string]debPackage{
		"iptables":        {Name: "iptables", Depends: "libc6 (>= 2.34),libxtables12 (= 1.8.9-2), netbase"},
		"libc6":           {Name: "libc6", Depends: "libgcc-s1"},
		"libgcc-s1":       {Name: "libgcc-s1", Depends: "libc6 (>= 2.35)"},
		"libxtables12":    {Name: "libxtables12", Depends: "libc6:any"},
		"netbase":         {Name: "netbase"},
		"ca-certificates": {Name: "ca-certificates", Depends: "openssl (>= 1.1.1), debconf (>= 0.5) | debconf-2.0"},
		"conntrack":       {Name: "conntrack", Depends: "libfoo | libc6"},
	}
	got, err := closure(index, []string{"iptables", "ca-certificates", "conntrack"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "ca-certificates conntrack iptables libc6 libgcc-s1 libxtables12 netbase"; strings.Join(got, " ") != want {
		t.Errorf("got %v, want %s", got, want)
	}
	index["netbase"] = debPackage{Name: "netbase", Depends: "libmissing"}
	if _, err := closure(index, []string{"iptables"}); err == nil || !strings.Contains(err.Error(), "netbase depends on libmissing, which no index has") {
		t.Errorf("a dependency no index has: got %v", err)
	}
}

func TestReleaseSHA256(t *testing.T) {
	release := []byte("Origin: Debian\nMD5Sum:\n 0123 10 main/binary-amd64/Packages.xz\nSHA256:\n abcd 10 main/binary-arm64/Packages.xz\n ef01 10 main/binary-amd64/Packages.xz\n")
	if got, err := releaseSHA256(release, "main/binary-amd64/Packages.xz"); err != nil || got != "ef01" {
		t.Errorf("got %q, %v, want ef01 from the SHA256 list, not the MD5 one", got, err)
	}
	if _, err := releaseSHA256(release, "main/binary-s390x/Packages.xz"); err == nil {
		t.Error("a file the Release does not list: no error")
	}
}

func TestReadArRefusesTruncated(t *testing.T) {
	for _, raw := range []string{"", "!<arch>\nshort", "!<arch>\ndebian-binary   0           0     0     100644  999       `\n2.0\n"} {
		if _, err := readAr([]byte(raw)); err == nil {
			t.Errorf("readAr(%q): no error", raw)
		}
	}
}
