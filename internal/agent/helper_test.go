package agent

import (
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// dialEnv makes the test binary a helper process: a peer that sends one
// HTTP request over the unix socket it names and prints the reply, run as
// another uid by TestRootSocketChecksPeerCredentials.
const dialEnv = "NODECACHE_TEST_DIAL"

func TestMain(m *testing.M) {
	if path := os.Getenv(dialEnv); path != "" {
		os.Exit(dialOnce(path))
	}
	if spec := os.Getenv(predecessorEnv); spec != "" {
		os.Exit(runFakePredecessor(spec))
	}
	os.Exit(m.Run())
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
