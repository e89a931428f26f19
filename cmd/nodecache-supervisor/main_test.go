package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// `nodecache-supervisor version` prints the version stamped at build time
// (-X main.version, as the Makefile and tools/image stamp nodecache's), Go's
// and the platform; stamped empty, it says dev, as `nodecache version` does,
// so that the two binaries of one build agree (Main warns when they do not).
func TestVersionCommand(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ stamp, want string }{
		{"v9.8.7", "v9.8.7"},
		{"", "dev"},
	} {
		bin := filepath.Join(dir, "nodecache-supervisor"+tc.want)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version="+tc.stamp, "-o", bin, ".")
		cmd.Env = append(os.Environ(), "GOFLAGS=", "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, b)
		}
		for _, arg := range []string{"version", "--version"} {
			b, err := exec.Command(bin, arg).CombinedOutput()
			if err != nil {
				t.Fatalf("nodecache-supervisor %s: %v\n%s", arg, err, b)
			}
			want := "nodecache-supervisor " + tc.want + " " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
			if string(b) != want {
				t.Errorf("stamped %q, %s: got %q, want %q", tc.stamp, arg, b, want)
			}
		}
	}
}

// Started by hand (no --exe-fd, no run), it exits 2 and says how it is
// started.
func TestByHand(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "nodecache-supervisor")
	if b, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	b, err := exec.Command(bin).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("got %v (%s), want exit status 2", err, b)
	}
	if !strings.Contains(string(b), "nodecache run") {
		t.Errorf("got %q, want it to name `nodecache run`", b)
	}
	// Its arguments right but no serving process to start (descriptor 9
	// is not open here): an error, 1, as `nodecache run` exits for it when
	// the supervisor runs in-process; not 2, which says bad arguments.
	b, err = exec.Command(bin, "--exe-fd=9", "--", "run").CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(b), "starting the serving process") {
		t.Errorf("got %v (%s), want exit status 1 after \"starting the serving process\"", err, b)
	}
}
