package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"time"
)

// fsEntry is one file, directory or symlink of a layer.
type fsEntry struct {
	Type byte   // tar.TypeReg, tar.TypeDir or tar.TypeSymlink
	Mode int64  // permission bits, with setuid/setgid/sticky
	Link string // a symlink's target
	Data []byte // a regular file's content
	From string // the package (or "image") that put it there, for error messages
}

// rootfs is a layer's file tree, keyed by path without a leading slash.
type rootfs map[string]*fsEntry

// droppedPaths are what Debian's slim images leave out too: documentation
// (but each package's copyright file), manual pages and translations.
var droppedPaths = []string{"usr/share/doc/", "usr/share/man/", "usr/share/info/", "usr/share/locale/", "usr/share/lintian/", "usr/share/bug/"}

func dropped(name string) bool {
	if strings.HasPrefix(name, "usr/share/doc/") && path.Base(name) == "copyright" {
		return false
	}
	for _, p := range droppedPaths {
		if strings.HasPrefix(name+"/", p) && name+"/" != "usr/share/doc/" {
			return true
		}
	}
	return false
}

// add puts e at name and its parent directories (0755) above it. The same
// directory from two packages is one entry; a file or link two packages
// ship must be the same in both.
func (fs rootfs) add(name string, e *fsEntry) error {
	name = strings.Trim(path.Clean("/"+name), "/")
	if name == "" {
		return nil
	}
	for d := path.Dir(name); d != "."; d = path.Dir(d) {
		if old, ok := fs[d]; ok && old.Type != tar.TypeDir {
			return fmt.Errorf("%s (from %s) is under %s, which %s made a non-directory", name, e.From, d, old.From)
		}
		if _, ok := fs[d]; !ok {
			fs[d] = &fsEntry{Type: tar.TypeDir, Mode: 0o755, From: e.From}
		}
	}
	old, ok := fs[name]
	switch {
	case !ok:
		fs[name] = e
	case old.Type == tar.TypeDir && e.Type == tar.TypeDir:
		if e.Mode != 0o755 { // a package's own mode wins over an implied parent's
			old.Mode = e.Mode
		}
	case old.Type == e.Type && old.Link == e.Link && bytes.Equal(old.Data, e.Data) && old.Mode == e.Mode:
	default:
		return fmt.Errorf("%s: %s and %s both ship it, differently", name, old.From, e.From)
	}
	return nil
}

// addDebData adds a package's data.tar (less droppedPaths). Hard links
// become copies of their target.
func (fs rootfs) addDebData(pkg string, data []byte) error {
	tr := tar.NewReader(bytes.NewReader(data))
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: data.tar: %w", pkg, err)
		}
		name := strings.Trim(path.Clean("/"+h.Name), "/")
		if name == "" || dropped(name) {
			continue
		}
		mode := h.Mode & 0o7777
		var e *fsEntry
		switch h.Typeflag {
		case tar.TypeDir:
			e = &fsEntry{Type: tar.TypeDir, Mode: mode}
		case tar.TypeSymlink:
			e = &fsEntry{Type: tar.TypeSymlink, Mode: 0o777, Link: h.Linkname}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", pkg, name, err)
			}
			files[name] = b
			e = &fsEntry{Type: tar.TypeReg, Mode: mode, Data: b}
		case tar.TypeLink:
			target := strings.Trim(path.Clean("/"+h.Linkname), "/")
			b, ok := files[target]
			if !ok {
				return fmt.Errorf("%s: %s: hard link to %s, which comes later or not at all", pkg, name, target)
			}
			e = &fsEntry{Type: tar.TypeReg, Mode: mode, Data: b}
		default:
			return fmt.Errorf("%s: %s: tar entry type %q is not a file, directory or link", pkg, name, h.Typeflag)
		}
		e.From = pkg
		if err := fs.add(name, e); err != nil {
			return err
		}
	}
}

// tarball writes the tree as a layer: entries sorted by name (a parent
// before its children), owned by root, every time set to mtime, so that
// the same tree always gives the same bytes.
func (fs rootfs) tarball(mtime time.Time) ([]byte, error) {
	names := make([]string, 0, len(fs))
	for n := range fs {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := fs[n]
		h := &tar.Header{Typeflag: e.Type, Name: n, Mode: e.Mode, ModTime: mtime, Format: tar.FormatPAX}
		switch e.Type {
		case tar.TypeDir:
			h.Name += "/"
		case tar.TypeSymlink:
			h.Linkname = e.Link
		case tar.TypeReg:
			h.Size = int64(len(e.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		if e.Type == tar.TypeReg {
			if _, err := tw.Write(e.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
