package main

import (
	"os"
	"os/exec"
	"testing"
)

// debVersionPairs are ordered pairs (a < b) from deb-version(7)'s rules and
// from versions the pins carry (security updates, binNMUs).
var debVersionPairs = [][2]string{
	{"1.0", "1.1"},
	{"1.0~rc1", "1.0"},
	{"1.0", "1.0-1"},
	{"1.0-1", "1.0-2"},
	{"1.9", "1.10"},
	{"1:0.9", "2:0.1"},
	{"9", "1:0"},
	{"2.36-9+deb12u9", "2.36-9+deb12u10"},
	{"1.4.7-1", "1.4.7-1+b2"},
	{"1.8.9-2", "1.8.9-2+deb12u1"},
	{"20230311", "20230311+deb12u1"},
	{"1.0a", "1.0b"},
	{"1.0", "1.0a"},
	{"1.0a+", "1.0+"},
	{"1.0~~", "1.0~"},
	{"0001", "2"},
}

func TestCompareDebVersions(t *testing.T) {
	for _, p := range debVersionPairs {
		if c := compareDebVersions(p[0], p[1]); c >= 0 {
			t.Errorf("compare(%q, %q) = %d, want < 0", p[0], p[1], c)
		}
		if c := compareDebVersions(p[1], p[0]); c <= 0 {
			t.Errorf("compare(%q, %q) = %d, want > 0", p[1], p[0], c)
		}
	}
	for _, v := range []string{"1.0", "1:2.3-4", "01", "1.0-0"} {
		if c := compareDebVersions(v, v); c != 0 {
			t.Errorf("compare(%q, %q) = %d, want 0", v, v, c)
		}
	}
	if c := compareDebVersions("1", "01"); c != 0 {
		t.Errorf("compare(1, 01) = %d, want 0", c)
	}
}

// TestCompareDebVersionsAsDpkg checks the same pairs against dpkg itself,
// where it is installed (every Debian machine the image is built on).
func TestCompareDebVersionsAsDpkg(t *testing.T) {
	dpkg, err := exec.LookPath("dpkg")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no dpkg (%v), and CI=true forbids skipping", err)
		}
		t.Skipf("SKIPPING: no dpkg here: %v", err)
	}
	for _, p := range debVersionPairs {
		if err := exec.Command(dpkg, "--compare-versions", p[0], "lt", p[1]).Run(); err != nil {
			t.Errorf("dpkg says %q is not lower than %q: the pair is wrong", p[0], p[1])
		}
	}
}
