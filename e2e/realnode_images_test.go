//go:build e2e

package e2e

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// The rig's test images. No registry is reachable, so each is a
// docker-archive tarball of one layer built here and imported into
// containerd: the pod sandbox (e2e/tools/pause) and the client (dnsload,
// and the host's glibc getent and dig with their libraries). The agent's
// image is the one make image builds (realnode_ociimage_test.go).

// imageFile is one file of an image: Src on the host copied to Dst, or a
// symlink to Link.
type imageFile struct {
	Src, Dst, Link string
}

type imageSpec struct {
	Ref        string // repository:tag
	Files      []imageFile
	Entrypoint []string
	Cmd        []string
}

// agentImageTags are the agent image references the rollout test switches
// between: two names of the one image make image built, so that the
// DaemonSet's pod template really changes (and the pods are replaced) while
// the image that runs stays the one that ships.
var agentImageTags = []string{"a", "b"}

func agentImage(tag string) string { return agentRepo + ":" + tag }

// buildNodeImages builds the test images' binaries and writes one tarball
// each into dir.
func buildNodeImages(ctx context.Context, dir string) ([]string, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return nil, err
	}
	build := func(out, pkg, version string) error {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "-ldflags", "-X main.version="+version, pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
		}
		return nil
	}
	var specs []imageSpec
	etc := []imageFile{
		{Src: "/etc/nsswitch.conf", Dst: "/etc/nsswitch.conf"},
		{Src: "/etc/protocols", Dst: "/etc/protocols"},
		{Src: "/etc/services", Dst: "/etc/services"},
	}
	pause := filepath.Join(dir, "pause")
	if err := build(pause, "./e2e/tools/pause", "e2e"); err != nil {
		return nil, err
	}
	specs = append(specs, imageSpec{Ref: pauseImage, Files: []imageFile{{Src: pause, Dst: "/pause"}}, Entrypoint: []string{"/pause"}})
	load := filepath.Join(dir, "dnsload")
	if err := build(load, "./e2e/tools/dnsload", "e2e"); err != nil {
		return nil, err
	}
	clientFiles, err := hostFilesWithLibs("getent", "dig")
	if err != nil {
		return nil, err
	}
	clientFiles = append(clientFiles, imageFile{Src: load, Dst: "/usr/local/bin/dnsload"})
	specs = append(specs, imageSpec{Ref: clientRepo, Files: append(clientFiles, etc...), Entrypoint: []string{"/usr/local/bin/dnsload"}})

	return writeImages(dir, specs)
}

// writeImages writes one docker-archive tarball per spec into dir.
func writeImages(dir string, specs []imageSpec) ([]string, error) {
	var tars []string
	for _, s := range specs {
		name := strings.NewReplacer("/", "_", ":", "_").Replace(s.Ref) + ".tar"
		p := filepath.Join(dir, name)
		if err := writeDockerArchive(p, s); err != nil {
			return nil, fmt.Errorf("image %s: %w", s.Ref, err)
		}
		tars = append(tars, p)
	}
	return tars, nil
}

var lddPath = regexp.MustCompile(`(/[^\s]+)`)

// hostFilesWithLibs resolves each binary on PATH and lists it with the
// shared libraries ldd says it loads, each at its host path.
func hostFilesWithLibs(bins ...string) ([]imageFile, error) {
	seen := map[string]bool{}
	var files []imageFile
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			files = append(files, imageFile{Src: p, Dst: p})
		}
	}
	for _, b := range bins {
		p, err := exec.LookPath(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b, err)
		}
		resolved, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, err
		}
		add(resolved)
		if resolved != p {
			files = append(files, imageFile{Dst: p, Link: resolved})
		}
		out, err := exec.Command("ldd", resolved).Output()
		if err != nil {
			continue // static
		}
		for _, line := range strings.Split(string(out), "\n") {
			if m := lddPath.FindString(line); m != "" && !strings.Contains(line, "linux-vdso") {
				add(m)
			}
		}
	}
	return files, nil
}

// writeDockerArchive writes s as a docker-archive (the `docker save`
// format): a manifest, an image config and one uncompressed layer.
func writeDockerArchive(path string, s imageSpec) error {
	layerPath := path + ".layer"
	defer os.Remove(layerPath)
	diffID, err := writeLayer(layerPath, s.Files)
	if err != nil {
		return err
	}
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"Entrypoint": s.Entrypoint,
			"Cmd":        s.Cmd,
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + diffID}},
	})
	if err != nil {
		return err
	}
	sum := sha256.Sum256(config)
	configName := hex.EncodeToString(sum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{
		"Config": configName, "RepoTags": []string{s.Ref}, "Layers": []string{diffID + "/layer.tar"},
	}})
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	addBytes := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := addBytes("manifest.json", manifest); err != nil {
		return err
	}
	if err := addBytes(configName, config); err != nil {
		return err
	}
	lf, err := os.Open(layerPath)
	if err != nil {
		return err
	}
	defer lf.Close()
	fi, err := lf.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: diffID + "/layer.tar", Mode: 0o644, Size: fi.Size(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, lf); err != nil {
		return err
	}
	return tw.Close()
}

// writeLayer writes the files as a layer tarball with the directories they
// need, and returns its sha256 (the layer's diff ID).
func writeLayer(path string, files []imageFile) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(f, h))
	dirs := map[string]bool{}
	for _, d := range []string{"etc", "tmp", "proc", "sys", "dev", "run", "var", "var/run", "usr/local/bin"} {
		dirs[d] = true
	}
	for _, fl := range files {
		for d := filepath.Dir(strings.TrimPrefix(fl.Dst, "/")); d != "." && d != "/"; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names) // parents first
	for _, d := range names {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: mode, Typeflag: tar.TypeDir}); err != nil {
			return "", err
		}
	}
	written := map[string]bool{}
	for _, fl := range files {
		name := strings.TrimPrefix(fl.Dst, "/")
		if written[name] {
			continue
		}
		written[name] = true
		if fl.Link != "" {
			if err := tw.WriteHeader(&tar.Header{Name: name, Linkname: fl.Link, Mode: 0o777, Typeflag: tar.TypeSymlink}); err != nil {
				return "", err
			}
			continue
		}
		if err := addHostFile(tw, name, fl.Src); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// addHostFile copies a host file (following symlinks) into tw as name.
func addHostFile(tw *tar.Writer, name, src string) error {
	sf, err := os.Open(src)
	if err != nil {
		return err
	}
	defer sf.Close()
	fi, err := sf.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), Size: fi.Size(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.Copy(tw, sf)
	return err
}
