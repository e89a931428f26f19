package main

import (
	"archive/tar"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// TestTarballIsOrdered: the same tree gives the same bytes however it was
// filled, entries sorted with parents first, owned by root, at one mtime.
func TestTarballIsOrdered(t *testing.T) {
	fill := func(order []string) rootfs {
		fs := rootfs{}
		for _, n := range order {
			if err := fs.add(n, &fsEntry{Type: tar.TypeReg, Mode: 0o644, Data: []byte(n), From: "test"}); err != nil {
				t.Fatal(err)
			}
		}
		return fs
	}
	mtime := time.Unix(1700000000, 0)
	a, err := fill([]string{"usr/sbin/b", "etc/x", "usr/lib/a", "usr-x"}).tarball(mtime)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fill([]string{"usr-x", "usr/lib/a", "etc/x", "usr/sbin/b"}).tarball(mtime)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("the same tree filled in two orders gives two tarballs")
	}
	var names []string
	tr := tar.NewReader(bytes.NewReader(a))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(mtime) {
			t.Errorf("%s: uid %d gid %d mtime %v, want 0 0 %v", h.Name, h.Uid, h.Gid, h.ModTime, mtime)
		}
		names = append(names, h.Name)
	}
	want := "etc/ etc/x usr/ usr-x usr/lib/ usr/lib/a usr/sbin/ usr/sbin/b"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("got entries %q, want %q", got, want)
	}
}

func TestRootfsConflicts(t *testing.T) {
	fs := rootfs{}
	if err := fs.add("usr/sbin/x", &fsEntry{Type: tar.TypeReg, Mode: 0o755, Data: []byte("1"), From: "p1"}); err != nil {
		t.Fatal(err)
	}
	if err := fs.add("usr/sbin/x", &fsEntry{Type: tar.TypeReg, Mode: 0o755, Data: []byte("1"), From: "p2"}); err != nil {
		t.Errorf("the same file from two packages: %v, want it accepted", err)
	}
	err := fs.add("usr/sbin/x", &fsEntry{Type: tar.TypeReg, Mode: 0o755, Data: []byte("2"), From: "p3"})
	if err == nil || !strings.Contains(err.Error(), "p1 and p3 both ship it") {
		t.Errorf("a different file at the same path: got %v, want an error naming both packages", err)
	}
	if err := fs.add("usr/sbin/x/y", &fsEntry{Type: tar.TypeReg, Mode: 0o644, From: "p4"}); err == nil {
		t.Error("a file under a file: accepted, want an error")
	}
}

func TestDropped(t *testing.T) {
	for name, want := range map[string]bool{
		"usr/share/doc/iptables/changelog.gz":     true,
		"usr/share/doc/iptables/copyright":        false,
		"usr/share/doc":                           false,
		"usr/share/man/man8/iptables.8.gz":        true,
		"usr/share/locale/de/LC_MESSAGES/x":       true,
		"usr/share/ca-certificates/mozilla/A.crt": false,
		"usr/sbin/iptables-nft":                   false,
	} {
		if got := dropped(name); got != want {
			t.Errorf("dropped(%q) = %v, want %v", name, got, want)
		}
	}
}
