package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// buildOptions are build's flags.
type buildOptions struct {
	Src, Out        string // the repository; the layout to write
	Version, Commit string // stamped into the agent and the labels
	Pins, Cache     string // debian-pins.txt; the .deb cache
	Mirror          string
	Repository      string // the name in index.json's ref.name annotation
	Epoch           int64  // SOURCE_DATE_EPOCH
	Platforms       string // comma-separated os/arch
	Binaries        string // if set, the binaries are also written here as nodecache-linux-ARCH and nodecache-supervisor-linux-ARCH
}

// agentPath is where the image has the agent; the entrypoint.
const agentPath = "usr/local/bin/nodecache"

// binaries are the image's commands, each built from ./cmd/NAME into
// usr/local/bin/NAME: the agent, and the supervisor's own binary, which
// `nodecache run` execs when it sits beside it (internal/supervise).
var binaries = []string{"nodecache", "nodecache-supervisor"}

// build writes the OCI image layout: an index of one image per platform,
// each a Debian layer and an agent layer.
func build(ctx context.Context, o buildOptions, log *slog.Logger) error {
	start := time.Now()
	for _, p := range []*string{&o.Src, &o.Out, &o.Cache, &o.Binaries} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	pf, err := readPins(o.Pins)
	if err != nil {
		return err
	}
	epoch := time.Unix(o.Epoch, 0).UTC()
	f := newFetcher(o.Mirror, snapshotBase, log)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	// Beside the output, so that it is renamed into place; its directory
	// (_output on a fresh checkout) may not exist yet.
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(o.Out)), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(o.Out)), ".image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, plat := range strings.Split(o.Platforms, ",") {
		osName, arch, ok := strings.Cut(strings.TrimSpace(plat), "/")
		if !ok || osName != "linux" {
			return fmt.Errorf("platform %q: want linux/ARCH", plat)
		}
		img, err := platformImage(ctx, f, o, pf, arch, epoch, tmp)
		if err != nil {
			return fmt.Errorf("linux/%s: %w", arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: platformOf(arch)}})
		log.Info("image built", "platform", "linux/"+arch, "elapsed", time.Since(start).Round(time.Millisecond))
	}
	lay := filepath.Join(tmp, "layout")
	p, err := layout.Write(lay, empty.Index)
	if err != nil {
		return err
	}
	ref := o.Repository + ":" + o.Version
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return err
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return err
	}
	if err := os.Rename(lay, o.Out); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	log.Info("image layout written", "dir", o.Out, "ref", ref, "index", d.String(), "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

// platformOf is the index's platform for arch: arm64 is ARMv8.
func platformOf(arch string) *v1.Platform {
	p := &v1.Platform{OS: "linux", Architecture: arch}
	if arch == "arm64" {
		p.Variant = "v8"
	}
	return p
}

// platformImage builds one architecture's image.
func platformImage(ctx context.Context, f *fetcher, o buildOptions, pf *pinFile, arch string, epoch time.Time, tmp string) (v1.Image, error) {
	base, err := baseRootfs(ctx, f, o, pf, arch)
	if err != nil {
		return nil, err
	}
	baseLayer, err := layerOf(base, epoch)
	if err != nil {
		return nil, err
	}
	agent := rootfs{}
	for _, name := range binaries {
		bin := filepath.Join(tmp, name+"-"+arch)
		if err := buildAgent(ctx, o, arch, bin, "./cmd/"+name); err != nil {
			return nil, err
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		if o.Binaries != "" {
			if err := os.WriteFile(filepath.Join(o.Binaries, name+"-linux-"+arch), b, 0o755); err != nil {
				return nil, err
			}
		}
		if err := agent.add("usr/local/bin/"+name, &fsEntry{Type: tar.TypeReg, Mode: 0o755, Data: b, From: "agent"}); err != nil {
			return nil, err
		}
	}
	agentLayer, err := layerOf(agent, epoch)
	if err != nil {
		return nil, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	plat := platformOf(arch)
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Config.Entrypoint = []string{"/" + agentPath}
	cf.Config.Cmd = []string{"run"}
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       "nodecache",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Commit,
		"org.opencontainers.image.description": "nodecache, node-local DNS for Kubernetes, on Debian " + pf.Suite + " packages pinned in tools/image/debian-pins.txt",
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	at := v1.Time{Time: epoch}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: baseLayer, MediaType: types.OCILayer, History: v1.History{Created: at, CreatedBy: "debian " + pf.Suite + ": " + pinNames(pf.forArch(arch)), Comment: "tools/image"}},
		mutate.Addendum{Layer: agentLayer, MediaType: types.OCILayer, History: v1.History{Created: at, CreatedBy: "go build ./cmd/nodecache ./cmd/nodecache-supervisor (" + o.Version + ")", Comment: "tools/image"}},
	)
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, at)
}

func pinNames(pins []pin) string {
	names := make([]string, len(pins))
	for i, p := range pins {
		names[i] = p.Name + "=" + p.Version
	}
	return strings.Join(names, " ")
}

// layerOf makes a gzip-compressed OCI layer of the tree.
func layerOf(fs rootfs, mtime time.Time) (v1.Layer, error) {
	b, err := fs.tarball(mtime)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// buildAgent cross-compiles the static binary of pkg as make build does, with
// nothing taken from the environment that would change its bytes: no cgo,
// -trimpath, no VCS stamp (the commit comes in by -X), the baseline
// instruction set of each architecture.
func buildAgent(ctx context.Context, o buildOptions, arch, out, pkg string) error {
	ldflags := "-s -w -X main.version=" + o.Version + " -X main.commit=" + o.Commit
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Dir = o.Src
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0", "GOFLAGS=-mod=readonly", "GOAMD64=v1", "GOARM64=v8.0", "GOEXPERIMENT=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for %s: %w\n%s", pkg, arch, err, b)
	}
	return nil
}
