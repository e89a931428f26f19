//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// The agent image the real node runs is the one `make image` builds (the
// OCI image layout of tools/image, linux/amd64 and linux/arm64): its amd64
// variant is imported into containerd, under both rollout tags. With
// NODECACHE_IMAGE set (make e2e sets it to the layout make image wrote) the
// test takes that layout; otherwise it runs `make image` itself into the
// rig's directory, so that a go test run never tests a stale layout.

// ociDescriptor is the part of an OCI descriptor the rig reads and writes.
type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *ociPlatform      `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ociPlatform struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant,omitempty"`
}

type ociIndex struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType"`
	Manifests     []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	Config ociDescriptor   `json:"config"`
	Layers []ociDescriptor `json:"layers"`
}

// ociLayout is an image layout on disk.
type ociLayout string

// blob reads a blob and checks it against its digest.
func (l ociLayout) blob(d ociDescriptor) ([]byte, error) {
	hexDigest, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		return nil, fmt.Errorf("digest %q is not sha256", d.Digest)
	}
	b, err := os.ReadFile(filepath.Join(string(l), "blobs", "sha256", hexDigest))
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != hexDigest || int64(len(b)) != d.Size {
		return nil, fmt.Errorf("blob %s: content does not match its descriptor", d.Digest)
	}
	return b, nil
}

func (l ociLayout) json(d ociDescriptor, v any) error {
	b, err := l.blob(d)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// platforms returns the manifests of the layout's one image index, by
// architecture, and the index's digest.
func (l ociLayout) platforms() (map[string]ociDescriptor, string, error) {
	var top ociIndex
	b, err := os.ReadFile(filepath.Join(string(l), "index.json"))
	if err != nil {
		return nil, "", err
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, "", fmt.Errorf("index.json: %w", err)
	}
	if len(top.Manifests) != 1 {
		return nil, "", fmt.Errorf("index.json has %d entries, want the one image index make image writes", len(top.Manifests))
	}
	var idx ociIndex
	if err := l.json(top.Manifests[0], &idx); err != nil {
		return nil, "", err
	}
	out := map[string]ociDescriptor{}
	for _, m := range idx.Manifests {
		if m.Platform == nil || m.Platform.OS != "linux" {
			return nil, "", fmt.Errorf("manifest %s has no linux platform", m.Digest)
		}
		out[m.Platform.Architecture] = m
	}
	return out, top.Manifests[0].Digest, nil
}

// files returns the regular files and symlinks (as "-> target") of one
// platform's image, later layers over earlier ones.
func (l ociLayout) files(m ociDescriptor) (map[string][]byte, error) {
	var man ociManifest
	if err := l.json(m, &man); err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, layer := range man.Layers {
		b, err := l.blob(layer)
		if err != nil {
			return nil, err
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", layer.Digest, err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("layer %s: %w", layer.Digest, err)
			}
			switch h.Typeflag {
			case tar.TypeReg:
				if files[h.Name], err = io.ReadAll(tr); err != nil {
					return nil, err
				}
			case tar.TypeSymlink:
				files[h.Name] = []byte("-> " + h.Linkname)
			}
		}
	}
	return files, nil
}

// imageBinaries are the executables the agent runs, with the links the
// agent and doctor call them by.
var imageBinaries = map[string]string{
	"usr/local/bin/nodecache":            "",
	"usr/local/bin/nodecache-supervisor": "",
	"usr/sbin/iptables-nft":              "usr/sbin/xtables-nft-multi",
	"usr/sbin/iptables-legacy":           "usr/sbin/xtables-legacy-multi",
	"usr/sbin/ip6tables-nft":             "usr/sbin/xtables-nft-multi",
	"usr/sbin/ip6tables-legacy":          "usr/sbin/xtables-legacy-multi",
	"usr/sbin/conntrack":                 "",
}

// checkPlatformBinaries reads the ELF header of the agent, its supervisor, both iptables
// flavours and conntrack in one platform's image.
func checkPlatformBinaries(files map[string][]byte, arch string) error {
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	for link, target := range imageBinaries {
		name, b := link, files[link]
		for hops := 0; bytes.HasPrefix(b, []byte("-> ")) && hops < 4; hops++ {
			name = path.Join(path.Dir(name), strings.TrimPrefix(string(b), "-> "))
			b = files[name]
		}
		if target != "" && name != target {
			return fmt.Errorf("%s: /%s leads to /%s, want /%s", arch, link, name, target)
		}
		if b == nil {
			return fmt.Errorf("%s: no /%s in the image", arch, name)
		}
		ef, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("%s: /%s: %w", arch, name, err)
		}
		if ef.Machine != want {
			return fmt.Errorf("%s: /%s is an ELF file for %v, want %v", arch, name, ef.Machine, want)
		}
	}
	return nil
}

// agentImageLayout returns the layout to run: NODECACHE_IMAGE's, or one
// `make image` builds now into dir.
func agentImageLayout(ctx context.Context, dir string) (ociLayout, error) {
	if p := os.Getenv("NODECACHE_IMAGE"); p != "" {
		return ociLayout(p), nil
	}
	out := filepath.Join(dir, "layout")
	cmd := exec.CommandContext(ctx, "make", "-C", "..", "image", "IMAGE_OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make image: %w\n%s", err, b)
	}
	return ociLayout(out), nil
}

// agentImageTar checks both platforms of the layout and writes a tarball
// for `ctr images import`: an OCI layout holding the amd64 image under
// every agent tag. It returns the tarball, the amd64 manifest's digest and
// the amd64 agent's bytes.
func agentImageTar(l ociLayout, dir string) (tarPath, digest string, agent []byte, err error) {
	plats, _, err := l.platforms()
	if err != nil {
		return "", "", nil, err
	}
	for _, arch := range []string{"amd64", "arm64"} {
		m, ok := plats[arch]
		if !ok {
			return "", "", nil, fmt.Errorf("the image has no linux/%s", arch)
		}
		files, err := l.files(m)
		if err != nil {
			return "", "", nil, err
		}
		if err := checkPlatformBinaries(files, arch); err != nil {
			return "", "", nil, err
		}
		if arch == "amd64" {
			agent = files["usr/local/bin/nodecache"]
		}
	}
	m := plats["amd64"]
	var man ociManifest
	if err := l.json(m, &man); err != nil {
		return "", "", nil, err
	}
	idx := ociIndex{SchemaVersion: 2, MediaType: "application/vnd.oci.image.index.v1+json"}
	for _, tag := range agentImageTags {
		d := m
		d.Annotations = map[string]string{"io.containerd.image.name": "docker.io/" + agentImage(tag), "org.opencontainers.image.ref.name": tag}
		idx.Manifests = append(idx.Manifests, d)
	}
	indexJSON, err := json.Marshal(idx)
	if err != nil {
		return "", "", nil, err
	}
	tarPath = filepath.Join(dir, "agent-oci.tar")
	f, err := os.Create(tarPath)
	if err != nil {
		return "", "", nil, err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return "", "", nil, err
	}
	if err := add("index.json", indexJSON); err != nil {
		return "", "", nil, err
	}
	for _, d := range append([]ociDescriptor{m, man.Config}, man.Layers...) {
		b, err := l.blob(d)
		if err != nil {
			return "", "", nil, err
		}
		if err := add("blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:"), b); err != nil {
			return "", "", nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return "", "", nil, err
	}
	return tarPath, m.Digest, agent, f.Close()
}
