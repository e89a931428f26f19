package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
)

// baseRootfs is the Debian layer of one architecture: every pinned
// package's files, and what the packages' maintainer scripts would have
// written (the image never runs them).
func baseRootfs(ctx context.Context, f *fetcher, o buildOptions, pf *pinFile, arch string) (rootfs, error) {
	pins := pf.forArch(arch)
	if len(pins) == 0 {
		return nil, fmt.Errorf("%s pins nothing for %s", o.Pins, arch)
	}
	fs := rootfs{}
	for _, d := range []string{"dev", "etc", "proc", "root", "run", "sys", "usr/local/bin", "var/lib/dpkg/status.d", "var/run"} {
		if err := fs.add(d, &fsEntry{Type: tar.TypeDir, Mode: 0o755, From: "image"}); err != nil {
			return nil, err
		}
	}
	if err := fs.add("tmp", &fsEntry{Type: tar.TypeDir, Mode: 0o1777, From: "image"}); err != nil {
		return nil, err
	}
	fs["root"].Mode = 0o700
	for _, p := range pins {
		local, err := f.deb(ctx, o.Cache, pf.Snapshot, p)
		if err != nil {
			return nil, err
		}
		d, err := readDeb(local)
		if err != nil {
			return nil, err
		}
		if err := checkControl(d.Control, p); err != nil {
			return nil, err
		}
		if err := fs.addDebData(p.Name, d.Data); err != nil {
			return nil, err
		}
		// As distroless does: one control file per package, where
		// scanners (trivy, grype, syft) look for what is installed.
		if err := fs.add("var/lib/dpkg/status.d/"+p.Name, &fsEntry{Type: tar.TypeReg, Mode: 0o644, Data: statusStanza(d.Control), From: "image"}); err != nil {
			return nil, err
		}
	}
	if err := fs.addMaintainerEffects(); err != nil {
		return nil, err
	}
	return fs, nil
}

// checkControl makes sure the .deb is the package the pin names.
func checkControl(control []byte, p pin) error {
	fields := controlFields(control)
	if fields["Package"] != p.Name || fields["Version"] != p.Version {
		return fmt.Errorf("%s: the .deb is %s %s, the pin says %s %s", p.Path, fields["Package"], fields["Version"], p.Name, p.Version)
	}
	if a := fields["Architecture"]; a != "all" && a != p.Arch {
		return fmt.Errorf("%s: the .deb is for %s, pinned for %s", p.Path, a, p.Arch)
	}
	return nil
}

func controlFields(control []byte) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(string(control), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && line != "" && line[0] != ' ' {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// statusStanza is the control file as dpkg's status file has it.
func statusStanza(control []byte) []byte {
	c := strings.TrimRight(string(control), "\n")
	i := strings.Index(c, "\n")
	if i < 0 {
		return []byte(c + "\nStatus: install ok installed\n")
	}
	return []byte(c[:i+1] + "Status: install ok installed\n" + c[i+1:] + "\n")
}

// nsswitch is the resolver order of the C library's lookups (iptables
// reads /etc/protocols and /etc/services through it).
const nsswitch = `passwd:         files
group:          files
hosts:          files dns
networks:       files
protocols:      files
services:       files
`

// addMaintainerEffects writes what the packages' configuration steps would:
//   - ca-certificates: update-ca-certificates concatenates every
//     certificate ca-certificates.conf lists (all of mozilla/, sorted) into
//     /etc/ssl/certs/ca-certificates.crt, the file Go's crypto/x509 reads;
//   - iptables: update-alternatives points iptables, ip6tables and their
//     -save and -restore at the nft flavour (Debian's default; the agent
//     calls iptables-nft and iptables-legacy by name);
//   - base-files' /etc/nsswitch.conf.
func (fs rootfs) addMaintainerEffects() error {
	var certs []string
	for n, e := range fs {
		if strings.HasPrefix(n, "usr/share/ca-certificates/mozilla/") && strings.HasSuffix(n, ".crt") && e.Type == tar.TypeReg {
			certs = append(certs, n)
		}
	}
	if len(certs) == 0 {
		return fmt.Errorf("no certificates under /usr/share/ca-certificates/mozilla: is ca-certificates pinned?")
	}
	sort.Strings(certs)
	var bundle bytes.Buffer
	for _, n := range certs {
		bundle.Write(fs[n].Data)
		if !bytes.HasSuffix(fs[n].Data, []byte("\n")) {
			bundle.WriteByte('\n')
		}
	}
	if err := fs.add("etc/ssl/certs/ca-certificates.crt", &fsEntry{Type: tar.TypeReg, Mode: 0o644, Data: bundle.Bytes(), From: "image"}); err != nil {
		return err
	}
	for _, cmd := range []string{"iptables", "ip6tables"} {
		for _, sfx := range []string{"", "-save", "-restore"} {
			target := cmd + "-nft" + sfx
			if _, ok := fs[path.Join("usr/sbin", target)]; !ok {
				return fmt.Errorf("no /usr/sbin/%s: is iptables pinned?", target)
			}
			if err := fs.add(path.Join("usr/sbin", cmd+sfx), &fsEntry{Type: tar.TypeSymlink, Mode: 0o777, Link: target, From: "image"}); err != nil {
				return err
			}
		}
	}
	return fs.add("etc/nsswitch.conf", &fsEntry{Type: tar.TypeReg, Mode: 0o644, Data: []byte(nsswitch), From: "image"})
}
