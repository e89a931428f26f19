package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/ulikunitz/xz"
)

// The packages the image carries, with everything they depend on: both
// iptables backends (iptables-nft and iptables-legacy are one package),
// conntrack for doctor, the CA certificates for DNS over TLS, and netbase
// for /etc/protocols and /etc/services.
var imageRoots = []string{"iptables", "conntrack", "ca-certificates", "netbase"}

// notInstalled are dependencies left out, each for a reason: they serve a
// package manager's configuration step, which the image never runs.
var notInstalled = map[string]string{
	"debconf":     "asks ca-certificates' configuration questions at install time",
	"debconf-2.0": "virtual package of debconf",
	"openssl":     "used by update-ca-certificates; the build writes the bundle itself",
}

// archive is one Debian repository the pins are taken from.
type archive struct {
	Root, Dist string // e.g. debian, bookworm-updates
}

func archivesFor(suite string) []archive {
	return []archive{{"debian", suite}, {"debian", suite + "-updates"}, {"debian-security", suite + "-security"}}
}

// debPackage is one stanza of a Packages index.
type debPackage struct {
	Name, Version, Arch, Filename, SHA256 string
	Depends                               string // Pre-Depends and Depends, comma-separated
	Root                                  string // the archive root it came from
}

// updatePins resolves imageRoots and their dependencies for each image
// architecture from the suite's archives (the newest version any of them
// has) and returns the new pin file. Each index is checked against its
// archive's InRelease, whose signature gpgv verifies with keyring.
func updatePins(ctx context.Context, f *fetcher, suite, keyring string, arches []string) (*pinFile, error) {
	pf := &pinFile{Suite: suite, Snapshot: time.Now().UTC().Format("20060102T150405Z")}
	for _, arch := range arches {
		index := map[string]debPackage{}
		for _, a := range archivesFor(suite) {
			pkgs, err := fetchIndex(ctx, f, a, arch, keyring)
			if err != nil {
				return nil, err
			}
			for _, p := range pkgs {
				if old, ok := index[p.Name]; !ok || compareDebVersions(p.Version, old.Version) > 0 {
					index[p.Name] = p
				}
			}
		}
		names, err := closure(index, imageRoots)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", arch, err)
		}
		for _, n := range names {
			p := index[n]
			pf.Pins = append(pf.Pins, pin{Name: p.Name, Version: p.Version, Arch: arch, SHA256: p.SHA256, Path: p.Root + "/" + p.Filename})
		}
	}
	return pf, nil
}

// closure returns roots and everything they depend on (the first
// alternative of each group that the index has), sorted.
func closure(index map[string]debPackage, roots []string) ([]string, error) {
	seen := map[string]bool{}
	queue := append([]string(nil), roots...)
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if seen[n] {
			continue
		}
		p, ok := index[n]
		if !ok {
			return nil, fmt.Errorf("package %s is in no index", n)
		}
		seen[n] = true
		for _, group := range strings.Split(p.Depends, ",") {
			if strings.TrimSpace(group) == "" {
				continue
			}
			dep, err := pickAlternative(index, group)
			if err != nil {
				return nil, fmt.Errorf("%s depends on %s", n, err)
			}
			if dep != "" {
				queue = append(queue, dep)
			}
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// pickAlternative returns the package one dependency group names: its
// first alternative the index has, or "" when the group is left out on
// purpose (notInstalled).
func pickAlternative(index map[string]debPackage, group string) (string, error) {
	var names []string
	for _, alt := range strings.Split(group, "|") {
		name := strings.Fields(alt)[0]
		name, _, _ = strings.Cut(name, ":") // libc6:any
		names = append(names, name)
		if _, skip := notInstalled[name]; skip {
			return "", nil
		}
		if _, ok := index[name]; ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("%s, which no index has (add it to notInstalled with a reason, or to imageRoots)", strings.Join(names, " | "))
}

// fetchIndex downloads an archive's main Packages.xz for arch, checks it
// against the signed InRelease and parses it.
func fetchIndex(ctx context.Context, f *fetcher, a archive, arch, keyring string) ([]debPackage, error) {
	dists := a.Root + "/dists/" + a.Dist + "/"
	inRelease, err := f.get(ctx, dists+"InRelease")
	if err != nil {
		return nil, err
	}
	release, err := verifyInRelease(ctx, inRelease, keyring)
	if err != nil {
		return nil, fmt.Errorf("%sInRelease: %w", dists, err)
	}
	name := "main/binary-" + arch + "/Packages.xz"
	want, err := releaseSHA256(release, name)
	if err != nil {
		return nil, fmt.Errorf("%sInRelease: %w", dists, err)
	}
	raw, err := f.get(ctx, dists+name)
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != want {
		return nil, fmt.Errorf("%s%s: sha256 %x, InRelease says %s", dists, name, sum, want)
	}
	zr, err := xz.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", dists, name, err)
	}
	pkgs, err := parsePackages(zr, a.Root)
	if err != nil {
		return nil, fmt.Errorf("%s%s: %w", dists, name, err)
	}
	return pkgs, nil
}

// verifyInRelease checks a clearsigned InRelease with gpgv and Debian's
// archive keyring and returns the signed text.
func verifyInRelease(ctx context.Context, signed []byte, keyring string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "gpgv", "--keyring", keyring, "--output", "-", "-")
	cmd.Stdin = bytes.NewReader(signed)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("gpgv --keyring %s: %w: %s", keyring, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// releaseSHA256 finds a file's digest in a Release file's SHA256 list.
func releaseSHA256(release []byte, name string) (string, error) {
	in := false
	sc := bufio.NewScanner(bytes.NewReader(release))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, " ") {
			in = strings.HasPrefix(line, "SHA256:")
			continue
		}
		if f := strings.Fields(line); in && len(f) == 3 && f[2] == name {
			return f[0], nil
		}
	}
	return "", fmt.Errorf("no SHA256 line for %s", name)
}

// parsePackages reads a Packages index: stanzas of "Field: value" lines
// separated by blank lines, continuation lines indented.
func parsePackages(r io.Reader, root string) ([]debPackage, error) {
	var out []debPackage
	var cur debPackage
	var deps []string
	flush := func() {
		if cur.Name != "" {
			cur.Depends = strings.Join(deps, ",")
			cur.Root = root
			out = append(out, cur)
		}
		cur, deps = debPackage{}, nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			flush()
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "Package":
			cur.Name = v
		case "Version":
			cur.Version = v
		case "Architecture":
			cur.Arch = v
		case "Filename":
			cur.Filename = v
		case "SHA256":
			cur.SHA256 = v
		case "Depends", "Pre-Depends":
			deps = append(deps, v)
		}
	}
	flush()
	return out, sc.Err()
}
