package cli

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/nodecache/nodecache/internal/agent"
)

const checkConfigUsage = `Usage: nodecache check-config --config FILE [flags of nodecache run]

Loads the config exactly as nodecache run would, with the same code: the
flags and the --config file, the files they name (a resolv.conf --upstream,
--upstream-tls-ca, --kube-dns-config-dir, --static-file), upstream and stub
domain specs, IPs and ports. It opens no socket and touches neither the
network nor the host. Exit 0 and "ok" when run would accept it; otherwise
exit 1 and the line to fix ("FILE:LINE: ..." for a --config setting).
`

// cmdCheckConfig is `nodecache check-config`, the nginx -t of nodecache.
func cmdCheckConfig(args []string, out io.Writer) error {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			fmt.Fprint(os.Stderr, checkConfigUsage)
			return flag.ErrHelp
		}
	}
	if err := agent.CheckConfig(args, agent.CheckOptions{}); err != nil {
		return fmt.Errorf("check-config: %w", err)
	}
	fmt.Fprintln(out, "ok: nodecache run accepts this config")
	return nil
}
