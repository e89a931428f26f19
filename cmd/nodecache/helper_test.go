package main

import (
	"fmt"
	"os"
	"strings"
)

// The test binary doubles as a helper process, chosen by environment
// (TestMain asks helperProcess first): with dispatchEnv set it is
// `nodecache` with the arguments it holds (separated by \x1f), a real agent
// process that a test can SIGKILL.
const dispatchEnv = "NODECACHE_TEST_DISPATCH"

// helperProcess runs the helper the environment asks for and returns its
// exit status; ok is false in a normal test run.
func helperProcess() (code int, ok bool) {
	if args := os.Getenv(dispatchEnv); args != "" {
		if err := dispatch(strings.Split(args, "\x1f")); err != nil {
			fmt.Fprintln(os.Stderr, "nodecache:", err)
			return 1, true
		}
		return 0, true
	}
	return 0, false
}
