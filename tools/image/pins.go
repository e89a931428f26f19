package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// A pin is one Debian package of one image architecture at one version,
// with the digest its .deb must have and where the archive keeps it.
type pin struct {
	Name, Version, Arch string // Arch is the image's: amd64 or arm64 (an _all.deb is listed under each)
	SHA256              string // of the .deb
	Path                string // under the mirror: debian/pool/... or debian-security/pool/...
}

// pinFile is debian-pins.txt: the packages of every architecture and the
// header lines that say where they came from.
type pinFile struct {
	Suite    string // e.g. bookworm
	Snapshot string // snapshot.debian.org timestamp of the update, e.g. 20261202T174000Z
	Pins     []pin
}

const pinHeader = `# The Debian packages in the nodecache image, one per line:
#   name version arch sha256 path
# arch is the image's architecture; path is the .deb under the mirror
# (https://deb.debian.org/), or under snapshot.debian.org/archive/ at the
# snapshot below once the archive has dropped that version.
# Written by tools/image/update-pins.sh; see docs/image.md.
`

// readPins parses a pins file.
func readPins(path string) (*pinFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parsePins(f, path)
}

func parsePins(r io.Reader, name string) (*pinFile, error) {
	pf := &pinFile{}
	sc := bufio.NewScanner(r)
	seen := map[string]bool{}
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "#"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[0] == "suite" {
				pf.Suite = f[1]
			}
			if len(f) == 2 && f[0] == "snapshot" {
				pf.Snapshot = f[1]
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) != 5 {
			return nil, fmt.Errorf("%s:%d: want name version arch sha256 path, got %d fields", name, n, len(f))
		}
		p := pin{Name: f[0], Version: f[1], Arch: f[2], SHA256: f[3], Path: f[4]}
		if len(p.SHA256) != 64 || strings.Trim(p.SHA256, "0123456789abcdef") != "" {
			return nil, fmt.Errorf("%s:%d: %s: sha256 %q is not 64 hex digits", name, n, p.Name, p.SHA256)
		}
		if !strings.HasSuffix(p.Path, ".deb") || strings.Contains(p.Path, "..") || strings.HasPrefix(p.Path, "/") {
			return nil, fmt.Errorf("%s:%d: %s: path %q is not a .deb under the mirror", name, n, p.Name, p.Path)
		}
		if key := p.Arch + "/" + p.Name; seen[key] {
			return nil, fmt.Errorf("%s:%d: %s is pinned twice for %s", name, n, p.Name, p.Arch)
		} else {
			seen[key] = true
		}
		pf.Pins = append(pf.Pins, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if pf.Suite == "" {
		return nil, fmt.Errorf("%s: no '# suite NAME' line", name)
	}
	return pf, nil
}

// forArch returns the pins of one image architecture, sorted by name.
func (pf *pinFile) forArch(arch string) []pin {
	var out []pin
	for _, p := range pf.Pins {
		if p.Arch == arch {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// write writes the pins file, sorted by architecture and name.
func (pf *pinFile) write(w io.Writer) error {
	pins := append([]pin(nil), pf.Pins...)
	sort.Slice(pins, func(i, j int) bool {
		if pins[i].Arch != pins[j].Arch {
			return pins[i].Arch < pins[j].Arch
		}
		return pins[i].Name < pins[j].Name
	})
	var b strings.Builder
	b.WriteString(pinHeader)
	fmt.Fprintf(&b, "# suite %s\n# snapshot %s\n", pf.Suite, pf.Snapshot)
	for _, p := range pins {
		fmt.Fprintf(&b, "%s %s %s %s %s\n", p.Name, p.Version, p.Arch, p.SHA256, p.Path)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
