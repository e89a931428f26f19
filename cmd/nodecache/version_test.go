package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestReadVersion(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "3f1c0de9a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0"
	for _, tc := range []struct {
		name          string
		stamped       string
		stampedCommit string
		bi            *debug.BuildInfo
		want          string
	}{
		{"release: the tag wins over the module version", "v0.2.0", "",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.2.1-0.20261202170000-3f1c0de9a2b4"}, Settings: vcs(rev, "false")},
			"nodecache v0.2.0 commit " + rev + " go1.26.8 " + platform},
		{"plain go build: module pseudo-version and commit", "dev", "",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261202170000-3f1c0de9a2b4+dirty"}, Settings: vcs(rev, "true")},
			"nodecache v0.0.0-20261202170000-3f1c0de9a2b4+dirty commit " + rev + "-modified go1.26.8 " + platform},
		{"go build -buildvcs=false", "dev", "",
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"nodecache dev commit unknown go1.26.8 " + platform},
		{"make image: -buildvcs=false with -X main.commit", "v0.2.0", rev,
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"nodecache v0.2.0 commit " + rev + " go1.26.8 " + platform},
		{"the build info's commit wins over a stamped one", "v0.2.0", "0000000000000000000000000000000000000000",
			&debug.BuildInfo{GoVersion: "go1.26.8", Settings: vcs(rev, "false")},
			"nodecache v0.2.0 commit " + rev + " go1.26.8 " + platform},
		{"no build info", "", "",
			nil,
			"nodecache dev commit unknown " + runtime.Version() + " " + platform},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readVersion(tc.stamped, tc.stampedCommit, tc.bi).String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestVersionCommand builds the command as make build does (CGO_ENABLED=0,
// -trimpath, -ldflags -X main.version) with Go's VCS stamping on (GOFLAGS
// cleared: a machine may set -buildvcs=false) and runs `nodecache version`:
// it names the stamped version and the checkout's commit (git rev-parse
// HEAD), which comes from Go's build info, not from the Makefile. Go stamps
// only a checkout whose .git is a directory, not a git worktree's .git file,
// so in a worktree the build runs in a shared clone of HEAD. With make
// build's flags the packages come from the build cache (-trimpath keeps the
// directory out of their keys): the cost is about one link.
func TestVersionCommand(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD in %s: %v (the test runs in a git checkout)", root, err)
	}
	commit := strings.TrimSpace(string(head))
	dir := t.TempDir()
	src := root
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		src = filepath.Join(dir, "src")
		if b, err := exec.Command("git", "clone", "--quiet", "--shared", root, src).CombinedOutput(); err != nil {
			t.Fatalf("git clone %s: %v\n%s", root, err, b)
		}
	}
	bin := filepath.Join(dir, "nodecache")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=true", "-ldflags", "-X main.version=v9.8.7", "-o", bin, "./cmd/nodecache")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOFLAGS=", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	b, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("nodecache version: %v\n%s", err, b)
	}
	got := strings.TrimSpace(string(b))
	if want := "nodecache v9.8.7 commit " + commit + " "; !strings.HasPrefix(got, want) {
		t.Errorf("got %q, want it to start with %q", got, want)
	}
}
