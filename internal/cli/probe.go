package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nodecache/nodecache/internal/agent"
	"github.com/nodecache/nodecache/internal/supervise"
)

// cmdProbe is `nodecache probe live|ready`: the kubelet's exec probe. It asks
// this pod's agent over the pod's own probe socket and exits non-zero unless
// the answer is 200.
func cmdProbe(args []string) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	dir := fs.String("pod-state-dir", "/var/run/nodecache-pod", "the agent's --pod-state-dir")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if len(args) == 0 || (args[0] != "live" && args[0] != "ready") {
		return errors.New("usage: nodecache probe live|ready [--pod-state-dir DIR]")
	}
	what := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	// As the serving process's: killed before the supervisor when the
	// container is at its memory limit (agent.ServingOOMScoreAdj).
	_ = supervise.RaiseOOMScore(os.Getpid(), agent.ServingOOMScoreAdj)
	body, err := agent.Probe(*dir, what, *timeout)
	fmt.Print(string(body))
	return err
}
