package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestBuildReproducible builds the image twice from this checkout and the
// committed pins (the .debs from the cache make image fills, so only the
// first build on a machine downloads them) and wants the same layout, byte
// for byte: the same index digest, manifests, configs and layers. It then
// reads each platform's image: the agent, the supervisor's binary and
// iptables are ELF files of that platform's machine (the first two static
// and not position-independent, as the supervisor's codePages wants), the CA bundle is there, the entrypoint is the agent.
func TestBuildReproducible(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := func(out string) buildOptions {
		return buildOptions{Src: "../..", Out: filepath.Join(dir, out), Version: "v0.0.0-repro", Commit: strings.Repeat("0", 40),
			Pins: "debian-pins.txt", Cache: defaultCache(), Mirror: "https://deb.debian.org/", Repository: "nodecache",
			Platforms: "linux/amd64,linux/arm64"}
	}
	// b's directory does not exist yet, as _output on a fresh checkout.
	for _, out := range []string{"a", filepath.Join("fresh", "b")} {
		if err := build(t.Context(), opts(out), log); err != nil {
			t.Fatalf("build %s: %v", out, err)
		}
	}
	a, b := layoutFiles(t, filepath.Join(dir, "a")), layoutFiles(t, filepath.Join(dir, "fresh", "b"))
	if len(a) != len(b) {
		t.Errorf("the two layouts have %d and %d files", len(a), len(b))
	}
	for name, content := range a {
		if !bytes.Equal(content, b[name]) {
			t.Errorf("%s differs between the two builds", name)
		}
	}
	idx, err := imageIndex(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	if len(m.Manifests) != len(machines) {
		t.Fatalf("index has %d manifests, want one per platform (%d)", len(m.Manifests), len(machines))
	}
	for _, desc := range m.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkPlatformImage(t, img, desc.Platform.Architecture, machines[desc.Platform.Architecture])
	}
}

// checkPlatformImage reads the files of an image's layers and checks the
// binaries' ELF machine.
func checkPlatformImage(t *testing.T, img v1.Image, arch string, want elf.Machine) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != arch || cf.OS != "linux" || strings.Join(cf.Config.Entrypoint, " ") != "/usr/local/bin/nodecache" {
		t.Errorf("%s: config says %s/%s entrypoint %v, want linux/%s /usr/local/bin/nodecache", arch, cf.OS, cf.Architecture, cf.Config.Entrypoint, arch)
	}
	files := imageFiles(t, img)
	for _, f := range []string{"usr/local/bin/nodecache", "usr/local/bin/nodecache-supervisor", "usr/sbin/xtables-nft-multi", "usr/sbin/xtables-legacy-multi", "usr/sbin/conntrack"} {
		b, ok := files[f]
		if !ok {
			t.Errorf("%s: no /%s in the image", arch, f)
			continue
		}
		ef, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s: /%s: %v", arch, f, err)
			continue
		}
		if ef.Machine != want {
			t.Errorf("%s: /%s is for %v, want %v", arch, f, ef.Machine, want)
		}
		if strings.HasPrefix(f, "usr/local/bin/") && ef.Type != elf.ET_EXEC {
			t.Errorf("%s: /%s is %v, want ET_EXEC (static, not PIE)", arch, f, ef.Type)
		}
	}
	if c := bytes.Count(files["etc/ssl/certs/ca-certificates.crt"], []byte("BEGIN CERTIFICATE")); c < 100 {
		t.Errorf("%s: /etc/ssl/certs/ca-certificates.crt holds %d certificates, want the Mozilla set (over 100)", arch, c)
	}
}

// imageFiles returns the regular files of an image's layers, later layers
// over earlier ones.
func imageFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				b, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				files[h.Name] = b
			}
		}
		rc.Close()
	}
	return files
}

// layoutFiles reads every file of a layout directory.
func layoutFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
