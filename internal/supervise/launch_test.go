package supervise

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// launch is `nodecache run`'s start in a copy of this test binary
// (SUPERVISE_TEST_LAUNCH set): Start, then its error's status. In-process,
// the serving process is this binary again, in role never-serves.
func launch() int {
	err := Start(Launch{Args: []string{"-test.run=^$"}, LogLevel: "debug", LogFormat: "json", Version: "v-test",
		OOMScoreAdj: 7}, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 99
}

// runLaunch runs launch in a copy of this test binary in dir, with the
// supervisor binary script beside it unless script is empty.
func runLaunch(t *testing.T, dir, script string) (string, error) {
	t.Helper()
	self, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	exe := filepath.Join(dir, "nodecache")
	out, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o700) //nolint:gosec // an executable the test runs
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, self); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if script != "" {
		if err := os.WriteFile(filepath.Join(dir, BinaryName), []byte(script), 0o700); err != nil { //nolint:gosec // an executable the test runs
			t.Fatal(err)
		}
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "SUPERVISE_TEST_LAUNCH=1", "SUPERVISE_TEST_ROLE=never-serves", "SUPERVISE_TEST_DIR="+dir)
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// With the supervisor binary beside nodecache, Start execs it (the script
// here writes what it was given): its flags, then the serving process's
// arguments, and a descriptor open on the nodecache binary that ran.
func TestStartExecsTheBinaryBeside(t *testing.T) {
	dir := t.TempDir()
	out, err := runLaunch(t, dir, "#!/bin/sh\n"+
		"for a in \"$@\"; do echo \"$a\"; done > \"$SUPERVISE_TEST_DIR/argv\"\n"+
		"fd=${1#--exe-fd=}\nreadlink /proc/$$/fd/$fd > \"$SUPERVISE_TEST_DIR/exe\"\nexit 42\n")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 42 {
		t.Fatalf("got %v (%s), want the script's exit status 42", err, out)
	}
	argv, _ := os.ReadFile(filepath.Join(dir, "argv"))
	got := strings.Fields(string(argv))
	if len(got) != 8 || !strings.HasPrefix(got[0], "--exe-fd=") {
		t.Fatalf("the supervisor binary got %q, want --exe-fd=N and 7 more", got)
	}
	want := []string{"--argv0=" + filepath.Join(dir, "nodecache"), "--log-level=debug", "--log-format=json",
		"--oom-score-adj=7", "--agent-version=v-test", "--", "-test.run=^$"}
	if !reflect.DeepEqual(got[1:], want) {
		t.Errorf("the supervisor binary got %q after --exe-fd, want %q", got[1:], want)
	}
	exe, _ := os.ReadFile(filepath.Join(dir, "exe"))
	if strings.TrimSpace(string(exe)) != filepath.Join(dir, "nodecache") {
		t.Errorf("--exe-fd refers to %q, want the nodecache binary %s", exe, filepath.Join(dir, "nodecache"))
	}
}

// Without it, the same package supervises in the nodecache process: the
// serving process (this binary in role never-serves) exits 3 before it
// serves, and the supervisor with it; one line says why it ran in-process.
func TestStartInProcessWithoutTheBinary(t *testing.T) {
	dir := t.TempDir()
	out, err := runLaunch(t, dir, "")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("got %v (%s), want the serving process's exit status 3", err, out)
	}
	if want := `msg="the supervisor runs in the nodecache process" reason="no ` + filepath.Join(dir, BinaryName) + `"`; !strings.Contains(out, want) {
		t.Errorf("the log says %q, want a line with %s", out, want)
	}
	// and so does the serving process (status and doctor report it)
	var in Inherited
	b, _ := os.ReadFile(filepath.Join(dir, "inherited-0"))
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	if want := "no " + filepath.Join(dir, BinaryName); in.InProcess != want || in.Binary {
		t.Errorf("the serving process inherited %+v, want InProcess %q and no Binary", in, want)
	}
}

func TestBeside(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "nodecache")
	bin := filepath.Join(dir, BinaryName)
	for _, tc := range []struct {
		name   string
		make   func() error
		want   string
		reason string
	}{
		{"absent", func() error { return nil }, "", "no " + bin},
		{"not executable", func() error { return os.WriteFile(bin, nil, 0o600) }, "", bin + " is not executable"},
		{"executable", func() error { return os.Chmod(bin, 0o700) }, bin, ""}, //nolint:gosec // it must be executable
		{"a directory", func() error { _ = os.Remove(bin); return os.Mkdir(bin, 0o700) }, "", bin + " is not a regular file"},
	} {
		if err := tc.make(); err != nil {
			t.Fatal(err)
		}
		got, why := beside(exe)
		if got != tc.want || !strings.HasPrefix(why, tc.reason) {
			t.Errorf("%s: got %q, %q; want %q, %q", tc.name, got, why, tc.want, tc.reason)
		}
	}
	if got, why := beside(""); got != "" || why == "" {
		t.Errorf("unknown path: got %q, %q; want none and a reason", got, why)
	}
}

// What `nodecache run` writes, the supervisor binary reads back.
func TestArgvRoundTrip(t *testing.T) {
	l := Launch{Args: []string{"run", "--port", "53", "--", "x"}, LogLevel: "warn", LogFormat: "json", Version: "v1.2.3", OOMScoreAdj: 500}
	argv := l.argv("/bin/"+BinaryName, 5, "nodecache")
	got, err := parseArgs(argv[1:])
	if err != nil {
		t.Fatal(err)
	}
	want := binaryArgs{Launch: l, ExeFD: 5, Argv0: "nodecache"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// Started by hand, the binary says how it is meant to be started.
func TestParseArgsByHand(t *testing.T) {
	for _, args := range [][]string{nil, {"run"}, {"--exe-fd=3"}, {"--exe-fd=3", "--", "version"}} {
		if _, err := parseArgs(args); err == nil || !strings.Contains(err.Error(), "nodecache run") {
			t.Errorf("%q: got %v, want an error naming `nodecache run`", args, err)
		}
	}
	if _, err := parseArgs([]string{"--exe-fd=" + strconv.Itoa(3), "--", "run"}); err != nil {
		t.Errorf("got %v, want nil", err)
	}
}
