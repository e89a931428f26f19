package supervise

// Two entry points, one supervisor: `nodecache run` replaces itself
// (execve, the same pid) with BinaryName when that sits beside it, a
// binary that links only this package, so that the supervisor's memory is
// not the nodecache binary's package initialisation (client-go's schemes,
// Prometheus, miekg/dns: 3 MiB of heap it never uses); without one,
// `nodecache run` runs Run itself, as it did before the binary existed.

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/nodecache/nodecache/pkg/logkey"
)

// BinaryName is the supervisor's own binary, looked for in the directory
// of the nodecache binary that runs (cmd/nodecache-supervisor).
const BinaryName = "nodecache-supervisor"

// Launch is what `nodecache run` starts its supervisor with.
type Launch struct {
	// Args are the serving process's arguments after argv[0]: "run" and
	// the flags.
	Args []string
	// LogLevel and LogFormat are --log-level and --log-format, already
	// checked: the supervisor binary's logger is made from them.
	LogLevel, LogFormat string
	// Version is nodecache's: the supervisor binary warns when its own
	// differs.
	Version string
	// OOMScoreAdj is Config.OOMScoreAdj.
	OOMScoreAdj int
}

// Start runs the supervisor for l: it execs BinaryName from beside this
// process's binary (it does not return then), and runs Run in this process
// when there is none, or the exec fails. log is the in-process
// supervisor's logger; one line says which of the two runs.
func Start(l Launch, log *slog.Logger) error {
	exe, _ := os.Executable()
	bin, why := beside(exe)
	if bin != "" {
		why = execBinary(bin, l)
	}
	log.Info("the supervisor runs in the nodecache process", "reason", why)
	return Run(Config{Args: l.Args, Log: log, OOMScoreAdj: l.OOMScoreAdj, InProcess: why})
}

// beside returns the supervisor binary in exe's directory, or "" and why
// there is none to run.
func beside(exe string) (string, string) {
	if exe == "" {
		return "", "the nodecache binary's path is unknown"
	}
	bin := filepath.Join(filepath.Dir(exe), BinaryName)
	st, err := os.Stat(bin)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", "no " + bin
	case err != nil:
		return "", err.Error()
	case !st.Mode().IsRegular():
		return "", bin + " is not a regular file"
	}
	if err := unix.Access(bin, unix.X_OK); err != nil {
		return "", fmt.Sprintf("%s is not executable: %v", bin, err)
	}
	return bin, ""
}

// execBinary replaces this process with the supervisor binary bin, which
// runs the binary this process runs (the serving processes must be
// nodecache) through a descriptor open on it: a nodecache file replaced or
// removed meanwhile (an upgrade) does not change what a restart runs. It
// returns only when the exec failed, with why.
func execBinary(bin string, l Launch) string {
	fd, err := unix.Open("/proc/self/exe", unix.O_PATH, 0) // not close-on-exec: the supervisor gets it
	if err != nil {
		return fmt.Sprintf("opening the nodecache binary for %s: %v", bin, err)
	}
	err = syscall.Exec(bin, l.argv(bin, fd, os.Args[0]), os.Environ())
	_ = unix.Close(fd)
	return fmt.Sprintf("exec %s: %v", bin, err)
}

// argv is the supervisor binary's command line: its flags, then "--" and
// the serving process's arguments.
func (l Launch) argv(bin string, fd int, argv0 string) []string {
	return append([]string{bin, "--exe-fd=" + strconv.Itoa(fd), "--argv0=" + argv0,
		"--log-level=" + l.LogLevel, "--log-format=" + l.LogFormat,
		"--oom-score-adj=" + strconv.Itoa(l.OOMScoreAdj), "--agent-version=" + l.Version, "--"}, l.Args...)
}

// binaryArgs are the supervisor binary's flags, as argv wrote them.
type binaryArgs struct {
	Launch
	ExeFD int
	Argv0 string
}

func parseArgs(args []string) (binaryArgs, error) {
	var b binaryArgs
	fs := flag.NewFlagSet(BinaryName, flag.ContinueOnError)
	fs.IntVar(&b.ExeFD, "exe-fd", -1, "a descriptor open on the nodecache binary, which the serving processes run")
	fs.StringVar(&b.Argv0, "argv0", "nodecache", "the serving processes' argv[0]")
	fs.StringVar(&b.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&b.LogFormat, "log-format", "text", "text or json")
	fs.IntVar(&b.OOMScoreAdj, "oom-score-adj", 0, "added to the serving processes' oom_score_adj")
	fs.StringVar(&b.Version, "agent-version", "", "the nodecache binary's version")
	if err := fs.Parse(args); err != nil {
		return b, err
	}
	b.Args = fs.Args()
	if b.ExeFD <= 2 || len(b.Args) == 0 || b.Args[0] != "run" {
		return b, fmt.Errorf("%s is started by `nodecache run`, not by hand: want --exe-fd=N -- run FLAGS", BinaryName)
	}
	return b, nil
}

// UsageError is Main's answer to arguments it cannot use: the binary
// exits 2 for it, as nodecache does for bad flags, and 1 for any other
// error (docs/cli.md's exit statuses).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Main is the supervisor binary's: args are its arguments after argv[0],
// version its own build's. It returns as Run does; `version` prints the
// build and returns.
func Main(args []string, version string) error {
	if len(args) == 1 && (args[0] == "version" || args[0] == "--version") {
		fmt.Printf("%s %s %s %s/%s\n", BinaryName, version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return nil
	}
	b, err := parseArgs(args)
	if err != nil {
		return &UsageError{err}
	}
	log, err := NewLogger(b.LogLevel, b.LogFormat)
	if err != nil {
		return &UsageError{err}
	}
	log = log.With(logkey.Component, "supervisor")
	log.Info("the supervisor runs as its own binary", "version", version)
	if version != b.Version {
		log.Warn("the supervisor binary is not nodecache's version: install the two of one release together",
			"supervisor", version, "nodecache", b.Version)
	}
	return Run(Config{Args: b.Args, ExeFD: b.ExeFD, Argv0: b.Argv0, Log: log, OOMScoreAdj: b.OOMScoreAdj})
}

// NewLogger is the logger --log-level and --log-format ask for, on stderr:
// nodecache's (internal/agent) and the supervisor binary's, which takes
// both flags from it.
func NewLogger(level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
}
