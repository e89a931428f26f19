// Command nodecache-supervisor is `nodecache run`'s supervisor as a binary
// of its own (internal/supervise): `nodecache run` execs it, keeping its
// pid, when it sits beside the nodecache binary, and runs the same package
// in its own process when it does not. It links only the standard library,
// x/sys and the supervisor's packages, so it keeps less memory than the
// nodecache binary's package initialisation would (docs/architecture.md,
// Crash and restart).
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/nodecache/nodecache/internal/supervise"
)

// version is set at build time as nodecache's is (-ldflags "-X
// main.version=..."); else Go's module version, as nodecache reads its own.
var version = "dev"

func main() {
	v := version
	if v == "" { // stamped empty (-X main.version=), as nodecache reads its own: else every start warns of a mismatch
		v = "dev"
	}
	if bi, ok := debug.ReadBuildInfo(); ok && v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	err := supervise.Main(os.Args[1:], v)
	if err == nil {
		os.Exit(0)
	}
	// 1 for an error, as `nodecache run` exits when the supervisor runs in
	// it; the serving process's status; 2 for arguments it cannot use.
	code := 1
	var status interface{ ExitCode() int }
	var usage *supervise.UsageError
	switch {
	case errors.As(err, &status):
		code = status.ExitCode()
	case errors.As(err, &usage):
		code = 2
	}
	fmt.Fprintln(os.Stderr, supervise.BinaryName+":", err)
	os.Exit(code)
}
