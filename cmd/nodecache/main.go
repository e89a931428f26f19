// Command nodecache is the node-local DNS agent for Kubernetes and its
// troubleshooting CLI. `nodecache run` starts the agent (internal/agent);
// the other commands (internal/cli) talk to a running agent over its admin
// socket.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/nodecache/nodecache/internal/agent"
	"github.com/nodecache/nodecache/internal/cli"
)

// version and commit are set at build time with -ldflags "-X main.version=...
// -X main.commit=..." (the Makefile and the image build stamp `git describe`
// and the commit); readVersion falls back to Go's build info for both.
var (
	version = "dev"
	commit  = ""
)

func main() {
	err := dispatch(os.Args[1:])
	code := cli.ExitCode(err)
	var status interface{ ExitCode() int } // the supervisor's: its serving process's status
	if errors.As(err, &status) {
		code = status.ExitCode()
	}
	if code != 0 {
		fmt.Fprintln(os.Stderr, "nodecache:", err)
	}
	os.Exit(code)
}

// dispatch runs the command args names: `run` is the agent, `version` is
// here, every other one the CLI's.
func dispatch(args []string) error {
	v := currentVersion()
	if len(args) > 0 {
		switch args[0] {
		case "run":
			return agent.Main(args[1:], v.Version)
		case "version", "--version":
			fmt.Println(v)
			return nil
		}
	}
	return cli.Main(args, v.Version)
}
