//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The images Kubernetes' DNS tests run, under the names e2e.test asks for
// (`e2e.test --list-images`), built here because no registry is reachable.
// The pods use imagePullPolicy IfNotPresent, so an image imported under
// exactly that name is found. Each holds what the selected tests run in it:
//
//   - agnhost:2.59: /agnhost (Kubernetes' test binary at v1.35.4, static Go;
//     its default command is `pause`, as upstream), /coredns (the bench's
//     CoreDNS, static Go, for the configurable resolv.conf test) and the
//     shell tools below;
//   - jessie-dnsutils:1.7: the shell tools below.
//
// The shell tools are Debian's on this host, copied with the shared
// libraries ldd names, so they are glibc's: sh (dash), seq, sleep, cat,
// hostname, dig (BIND 9) and getent (glibc's own resolver). Upstream's
// agnhost is Alpine (musl) and its jessie image Debian (glibc); here both
// probers are glibc. TestTruncatedClients runs a real musl client.
const (
	conformanceAgnhost = "registry.k8s.io/e2e-test-images/agnhost:2.59"
	conformanceJessie  = "registry.k8s.io/e2e-test-images/jessie-dnsutils:1.7"
)

// conformanceTools are the host binaries both images carry.
var conformanceTools = []string{"sh", "seq", "sleep", "cat", "hostname", "dig", "getent"}

// conformanceImageSpecs lists the two images; agnhost and coredns are the
// binaries' host paths.
func conformanceImageSpecs(dir, agnhost, coredns string) ([]imageSpec, error) {
	var tools []string
	for _, b := range conformanceTools {
		p := filepath.Join("/usr/bin", b) // Debian 12: /bin is /usr/bin
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("the DNS tests' images need %s from the host: %w", b, err)
		}
		tools = append(tools, p)
	}
	files, err := hostFilesWithLibs(tools...)
	if err != nil {
		return nil, err
	}
	nsswitch := filepath.Join(dir, "nsswitch.conf")
	if err := os.WriteFile(nsswitch, []byte("passwd: files\ngroup: files\nhosts: files dns\n"), 0o644); err != nil {
		return nil, err
	}
	files = append(files,
		imageFile{Dst: "/bin", Link: "usr/bin"},
		imageFile{Src: nsswitch, Dst: "/etc/nsswitch.conf"},
		imageFile{Src: "/etc/protocols", Dst: "/etc/protocols"},
		imageFile{Src: "/etc/services", Dst: "/etc/services"})
	agn := append([]imageFile{{Src: agnhost, Dst: "/agnhost"}, {Src: coredns, Dst: "/coredns"}}, files...)
	return []imageSpec{
		{Ref: conformanceAgnhost, Files: agn, Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}},
		{Ref: conformanceJessie, Files: files, Cmd: []string{"/bin/sh"}},
	}, nil
}

// conformanceImages writes the two image tarballs into the e2e cache
// (NODECACHE_E2E_CACHE, default ~/.cache/nodecache-e2e), reusing a tarball
// whose inputs (each file's path, size and time) are unchanged, and returns
// their paths.
func conformanceImages(agnhost, coredns string) ([]string, error) {
	cache := os.Getenv("NODECACHE_E2E_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, err
		}
		cache = filepath.Join(home, ".cache", "nodecache-e2e")
	}
	dir := filepath.Join(cache, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	specs, err := conformanceImageSpecs(dir, agnhost, coredns)
	if err != nil {
		return nil, err
	}
	var tars []string
	for _, s := range specs {
		key, err := imageKey(s)
		if err != nil {
			return nil, err
		}
		base := strings.NewReplacer("/", "_", ":", "_").Replace(s.Ref)
		p := filepath.Join(dir, base+"-"+key+".tar")
		if _, err := os.Stat(p); err != nil {
			old, _ := filepath.Glob(filepath.Join(dir, base+"-*.tar"))
			for _, o := range old {
				_ = os.Remove(o)
			}
			if err := writeDockerArchive(p+".tmp", s); err != nil {
				return nil, fmt.Errorf("image %s: %w", s.Ref, err)
			}
			if err := os.Rename(p+".tmp", p); err != nil {
				return nil, err
			}
		}
		tars = append(tars, p)
	}
	return tars, nil
}

// imageKey hashes what goes into an image: its name and config, and each
// file's destination, source, size and modification time.
func imageKey(s imageSpec) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s|%q|%q\n", s.Ref, s.Entrypoint, s.Cmd)
	for _, f := range s.Files {
		fmt.Fprintf(h, "%s|%s|%s", f.Dst, f.Src, f.Link)
		if f.Src != "" {
			fi, err := os.Stat(f.Src)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "|%d|%d", fi.Size(), fi.ModTime().UnixNano())
		}
		fmt.Fprintln(h)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// importConformanceImages builds (or reuses) and imports the two images,
// and fails t unless containerd then lists both names.
func (n *realNode) importConformanceImages(t *testing.T, ctx context.Context, agnhost, coredns string) {
	t.Helper()
	tars, err := conformanceImages(agnhost, coredns)
	if err != nil {
		t.Fatalf("building the DNS tests' images: %v", err)
	}
	n.importTars(ctx, tars)
	out, err := n.ctr(ctx, "images", "ls", "-q")
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{conformanceAgnhost, conformanceJessie} {
		if !strings.Contains(out, ref) {
			t.Fatalf("image %s missing from the node's containerd after the import; it has:\n%s", ref, out)
		}
	}
}
