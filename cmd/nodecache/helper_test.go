package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"
)

// The test binary doubles as two helper processes, chosen by environment
// (TestMain asks helperProcess first):
//   - dispatchEnv: `nodecache` with the arguments it holds (separated by
//     \x1f), a real agent process that a test can SIGKILL;
//   - dialEnv: a peer that sends one HTTP request over the unix socket it
//     names and prints the reply, run as another uid.
const (
	dispatchEnv = "NODECACHE_TEST_DISPATCH"
	dialEnv     = "NODECACHE_TEST_DIAL"
)

// helperProcess runs the helper the environment asks for and returns its
// exit status; ok is false in a normal test run.
func helperProcess() (code int, ok bool) {
	if path := os.Getenv(dialEnv); path != "" {
		return dialOnce(path), true
	}
	if args := os.Getenv(dispatchEnv); args != "" {
		if err := dispatch(strings.Split(args, "\x1f")); err != nil {
			fmt.Fprintln(os.Stderr, "nodecache:", err)
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// dialOnce sends GET / over the unix socket path and prints what comes back.
func dialOnce(path string) int {
	c, err := net.Dial("unix", path) //nolint:gosec // G704: the socket the parent test made
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		fmt.Println("write:", err)
	}
	b, err := io.ReadAll(c)
	fmt.Printf("reply: %q err: %v\n", b, err)
	return 0
}
