// Command nodecache is the node-local DNS agent for Kubernetes and its
// troubleshooting CLI. `nodecache run` starts the agent; the other commands
// talk to a running agent over its admin socket.
package main

import (
	"fmt"
	"os"

	"github.com/nodecache/nodecache/internal/agent"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `nodecache: node-local DNS for Kubernetes

Usage:
  nodecache run [flags]                 start the agent (nodecache run -h for flags)
  nodecache status                      one screen: listeners, interface, rules, zone, cache, upstreams
  nodecache query NAME [TYPE]           ask the local agent; shows answer, rcode, time and source
  nodecache explain NAME (--pod NS/NAME | --resolv-conf FILE)
                                        walk a pod resolver's search path and show every query
  nodecache cache stats|dump [--filter SUFFIX]|flush (NAME | --zone SUFFIX | --all)
  nodecache zone list [--namespace NS]|show NAME
  nodecache upstreams                   upstream health and latency
  nodecache top                         live query rate, rcodes, latency, top client pods
  nodecache tail [--pod P] [--namespace NS] [--suffix S] [--rcode R] [--min-latency D]
                                        the node's queries as they are answered
  nodecache doctor                      check this node and say what to fix
  nodecache reload                      apply the config files now (the agent also watches them)
  nodecache migrate --corefile FILE [--kube-dns-config DIR] [--from-cluster] [-o FILE]
                                        write a config that reproduces a CoreDNS or
                                        node-local-dns Corefile; exit 3 lists what it cannot
  nodecache probe live|ready            the kubelet's exec probe: asks this pod's agent over its probe socket
  nodecache cleanup [--force] [run flags]
                                        remove the rules and the link a crashed agent left
  nodecache version

The CLI commands take --admin-socket (default /run/nodecache/admin.sock) and -o json|yaml.
Exit status: 0 ok, 1 error, 2 usage error, 3 agent unreachable, 4 doctor found
a FAIL, 5 doctor found a WARN and no FAIL.
`

func main() {
	err := dispatch(os.Args[1:])
	code := exitCode(err)
	if code != exitOK {
		fmt.Fprintln(os.Stderr, "nodecache:", err)
	}
	os.Exit(code)
}

func dispatch(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return usageErrorf("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return agent.Main(rest, version)
	case "migrate":
		return cmdMigrate(rest)
	case "probe":
		return cmdProbe(rest)
	case "cleanup":
		return cmdCleanup(rest)
	case "version", "--version":
		fmt.Println(version)
		return nil
	case "help", "-h", "--help":
		fmt.Print(usage)
		return nil
	}
	if c, ok := cliCommands()[cmd]; ok {
		return c(rest)
	}
	fmt.Fprint(os.Stderr, usage)
	return usageErrorf("unknown command %q", cmd)
}
