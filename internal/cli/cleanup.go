package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nodecache/nodecache/internal/agent"
	"github.com/nodecache/nodecache/pkg/iface"
)

// `nodecache cleanup` removes what an agent leaves on the node when it
// cannot tear down itself (SIGKILL, OOM, a force-deleted pod): its iptables
// rules in both flavours and both families, the link's addresses and the
// link. It takes the flags of `nodecache run` (and --config), so a DaemonSet's
// arguments can be reused as they are; only the interface and rule flags
// matter. It refuses a link nodecache did not create (even with --force),
// and does nothing while an agent answers on the admin socket unless --force
// is given, so that it is harmless in a preStop hook and by hand next to a
// running agent. An agent that is stopped or hung still answers as far as
// cleanup can tell (the kernel accepts the connection): --force is for that
// case, and warns that an agent that runs on puts its state back.

const cleanupUsage = `Usage: nodecache cleanup [--force] [flags of nodecache run]

Removes nodecache's iptables rules (nft and legacy, IPv4 and IPv6), the
addresses on its link and the link. Run it after a crash or a force-delete
left them behind. It takes the same flags as run (--interface-name,
--local-ip, --setup-interface, --setup-iptables, --admin-socket, --config);
the defaults match run's. It does nothing while an agent answers on
--admin-socket, unless --force (for an agent that is hung or about to be
stopped: one that runs on puts its link and rules back). --force does not
make it delete a link nodecache did not create.
`

func cmdCleanup(args []string) error {
	force := false
	var rest []string
	for _, a := range args {
		switch a {
		case "--force", "-force", "--force=true", "-force=true":
			force = true
		case "--force=false", "-force=false":
			force = false
		case "-h", "--help", "-help":
			fmt.Fprint(os.Stderr, cleanupUsage) // where the flag sets print their -h
			return flag.ErrHelp
		default:
			rest = append(rest, a)
		}
	}
	cfg, err := agent.ParseConfig(rest)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	log, err := agent.NewLogger(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cleanup(ctx, cfg, force, os.Stdout, log)
}

// cleanup does the work of cmdCleanup and reports in one line to out.
func cleanup(ctx context.Context, cfg *agent.Config, force bool, out io.Writer, log *slog.Logger) error {
	if !cfg.SetupInterface && !cfg.SetupIPTables {
		fmt.Fprintln(out, "nothing to clean up: --setup-interface=false --setup-iptables=false")
		return nil
	}
	if agentAnswers(ctx, cfg.AdminSocket) {
		if !force {
			fmt.Fprintf(out, "an agent answers on %s: leaving its interface and rules (stop it first, or give --force)\n", cfg.AdminSocket)
			return nil
		}
		// Its reconciler re-creates the link at once and the rules within
		// its --sync-interval: say so rather than claim a clean node.
		fmt.Fprintf(out, "an agent answers on %s: removing its interface and rules anyway (--force); it puts them back while it runs\n", cfg.AdminSocket)
	}
	err := iface.Cleanup(ctx, agent.IfaceConfig(cfg), log)
	if errors.Is(err, iface.ErrForeignLink) {
		return fmt.Errorf("cleanup: %w", err)
	}
	if err != nil {
		return fmt.Errorf("cleanup: some of nodecache's state may remain: %w", err)
	}
	fmt.Fprintf(out, "removed nodecache's rules and link %s (or found none)\n", cfg.InterfaceName)
	return nil
}

// agentAnswers reports whether something accepts connections on the admin
// socket: a live agent, whose host state is not ours to remove.
func agentAnswers(ctx context.Context, path string) bool {
	if path == "" {
		return false
	}
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}
