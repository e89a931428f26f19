package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// debFile is a .deb read into memory: its control file and its data
// tarball, decompressed.
type debFile struct {
	Control []byte // the control file of control.tar.*
	Data    []byte // data.tar, uncompressed
}

// readDeb reads a .deb: an ar archive of debian-binary, control.tar.* and
// data.tar.* (deb(5)).
func readDeb(path string) (*debFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	members, err := readAr(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	d := &debFile{}
	for name, body := range members {
		switch {
		case strings.HasPrefix(name, "control.tar"):
			ctl, err := decompress(name, body)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", path, name, err)
			}
			if d.Control, err = tarMember(ctl, "./control"); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", path, name, err)
			}
		case strings.HasPrefix(name, "data.tar"):
			if d.Data, err = decompress(name, body); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", path, name, err)
			}
		}
	}
	if d.Control == nil || d.Data == nil {
		return nil, fmt.Errorf("%s: not a .deb: no control.tar or data.tar member", path)
	}
	return d, nil
}

// readAr splits an ar archive ("!<arch>\n", then 60-byte headers each
// followed by the member, padded to an even length) into its members.
func readAr(raw []byte) (map[string][]byte, error) {
	const magic = "!<arch>\n"
	if !bytes.HasPrefix(raw, []byte(magic)) {
		return nil, errors.New("not an ar archive")
	}
	out := map[string][]byte{}
	for off := len(magic); off < len(raw); {
		if len(raw)-off < 60 {
			return nil, fmt.Errorf("truncated ar header at byte %d", off)
		}
		h := raw[off : off+60]
		name := strings.TrimSuffix(strings.TrimSpace(string(h[0:16])), "/")
		size, err := strconv.ParseInt(strings.TrimSpace(string(h[48:58])), 10, 64)
		if err != nil || size < 0 || string(h[58:60]) != "`\n" {
			return nil, fmt.Errorf("bad ar header at byte %d", off)
		}
		off += 60
		if int64(len(raw)-off) < size {
			return nil, fmt.Errorf("ar member %s truncated", name)
		}
		out[name] = raw[off : off+int(size)]
		off += int(size) + int(size%2)
	}
	return out, nil
}

// decompress undoes the compression a member's name says.
func decompress(name string, body []byte) ([]byte, error) {
	var r io.Reader
	switch {
	case strings.HasSuffix(name, ".xz"):
		zr, err := xz.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		r = zr
	case strings.HasSuffix(name, ".gz"):
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	case strings.HasSuffix(name, ".zst"):
		zr, err := zstd.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	case strings.HasSuffix(name, ".tar"):
		return body, nil
	default:
		return nil, fmt.Errorf("unknown compression of %s", name)
	}
	return io.ReadAll(r)
}

// tarMember returns one regular file of a tarball.
func tarMember(tarball []byte, name string) ([]byte, error) {
	tr := tar.NewReader(bytes.NewReader(tarball))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("no %s in it", name)
		}
		if err != nil {
			return nil, err
		}
		if h.Name == name || h.Name == strings.TrimPrefix(name, "./") {
			return io.ReadAll(tr)
		}
	}
}
