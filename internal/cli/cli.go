package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/nodecache/nodecache/internal/adminapi"
)

// Usage is what `nodecache help` prints.
const Usage = `nodecache: node-local DNS for Kubernetes

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
  nodecache check-config --config FILE [run flags]
                                        load a config as run would, without opening a socket
  nodecache probe live|ready            the kubelet's exec probe: asks this pod's agent over its probe socket
  nodecache cleanup [--force] [run flags]
                                        remove the rules and the link a crashed agent left
  nodecache version                     the version (the release tag), commit, Go and platform

The commands that ask the agent take --admin-socket (default /run/nodecache/admin.sock)
and -o json|yaml; migrate's -o names its output file.
Exit status: 0 ok, 1 error, 2 usage error, 3 agent unreachable, 4 doctor found
a FAIL, 5 doctor found a WARN and no FAIL.
`

// Main runs the CLI command args names (every command but `run`, which is
// the agent's) and returns its error, which ExitCode maps to the exit
// status. version is the build's (cmd/nodecache prints `nodecache version`
// itself, with the commit), for the user agent of the API clients.
func Main(args []string, version string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, Usage)
		return usageErrorf("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "migrate":
		return cmdMigrate(rest, version)
	case "probe":
		return cmdProbe(rest)
	case "cleanup":
		return cmdCleanup(rest)
	case "check-config":
		return cmdCheckConfig(rest, os.Stdout)
	case "help", "-h", "--help":
		fmt.Print(Usage)
		return nil
	}
	if c, ok := cliCommands(version)[cmd]; ok {
		return c(rest)
	}
	fmt.Fprint(os.Stderr, Usage)
	return usageErrorf("unknown command %q", cmd)
}

// cliFunc is one CLI command: it parses args, talks to the agent and writes
// its report to out. ctx ends on SIGINT/SIGTERM.
type cliFunc func(ctx context.Context, out io.Writer, args []string) error

// cliTable maps command names to their implementations; version is the
// build's, for the user agent of doctor's API client.
func cliTable(version string) map[string]cliFunc {
	return map[string]cliFunc{
		"status":    cmdStatus,
		"upstreams": cmdUpstreams,
		"query":     cmdQuery,
		"explain":   cmdExplain,
		"cache":     cmdCache,
		"zone":      cmdZone,
		"top":       cmdTop,
		"doctor": func(ctx context.Context, out io.Writer, args []string) error {
			return cmdDoctor(ctx, out, args, version)
		},
		"reload": cmdReload,
		"tail":   cmdTail,
	}
}

// Commands are the names of the commands that take the common flags
// (--admin-socket, -o), sorted; Main also runs migrate, probe, cleanup,
// version and help.
func Commands() []string {
	names := make([]string, 0, len(cliTable("")))
	for name := range cliTable("") {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// cliCommands returns the commands Main dispatches to, each bound to
// stdout and to a context that ends on Ctrl-C.
func cliCommands(version string) map[string]func(args []string) error {
	out := make(map[string]func([]string) error)
	for name, fn := range cliTable(version) {
		out[name] = func(args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return fn(ctx, os.Stdout, args)
		}
	}
	return out
}

// errFindings is returned by commands whose report holds failures (doctor),
// so that the exit status is non-zero after the report was printed;
// errWarnings by doctor when its report holds warnings but no failure.
var (
	errFindings = errors.New("problems found")
	errWarnings = errors.New("warnings found")
)

// usageError is a command line that cannot be run as given: an unknown
// flag or subcommand, a missing argument, a bad value.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// Exit statuses of the CLI, documented in docs/observability.md.
const (
	exitOK          = 0
	exitError       = 1 // any other failure: the agent answered an error, output failed
	exitUsage       = 2 // bad flags or arguments
	exitUnreachable = 3 // the agent's admin socket cannot be reached
	exitDoctorFail  = 4 // doctor found at least one FAIL
	exitDoctorWarn  = 5 // doctor found WARNs and no FAIL
)

// ExitCode maps a command's error to the process exit status.
func ExitCode(err error) int {
	var ue *usageError
	var se *statusError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &se):
		return se.code
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, adminapi.ErrAgentUnreachable):
		return exitUnreachable
	case errors.Is(err, errFindings):
		return exitDoctorFail
	case errors.Is(err, errWarnings):
		return exitDoctorWarn
	}
	return exitError
}

// cliOpts are the flags every CLI command takes.
type cliOpts struct {
	socket string
	output string // "text", "json" or "yaml"
}

// newCLIFlags returns a flag set with the common flags registered on o.
func newCLIFlags(name string, o *cliOpts) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr) // -h and flag errors print the flag list there
	fs.StringVar(&o.socket, "admin-socket", "/run/nodecache/admin.sock", "the agent's admin socket")
	fs.StringVar(&o.output, "o", "text", "output format: text, json or yaml")
	return fs
}

// parseCLI parses args with flags and positional arguments in any order
// (`query web A -o json` as well as `query -o json web A`) and returns the
// positional ones, checked against min and max (max < 0: no limit).
func parseCLI(fs *flag.FlagSet, o *cliOpts, args []string, minArgs, maxArgs int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{msg: fmt.Sprintf("%s: %v", fs.Name(), err)}
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if o.output != "text" && o.output != "json" && o.output != "yaml" {
		return nil, usageErrorf("%s: -o %q: want text, json or yaml", fs.Name(), o.output)
	}
	if len(pos) < minArgs || (maxArgs >= 0 && len(pos) > maxArgs) {
		return nil, usageErrorf("%s: got %d arguments, want %s (see nodecache help)", fs.Name(), len(pos), argRange(minArgs, maxArgs))
	}
	return pos, nil
}

func argRange(lo, hi int) string {
	switch {
	case hi < 0:
		return fmt.Sprintf("at least %d", lo)
	case lo == hi:
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

// emit writes v as indented JSON or as YAML when o asks for it, else
// calls text.
func emit(out io.Writer, o *cliOpts, v any, text func(w io.Writer)) error {
	switch o.output {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("writing json: %w", err)
		}
		return nil
	case "yaml":
		return writeStructured(out, o, v)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	text(tw)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// writeStructured writes one record: a JSON line, or a YAML document that
// starts with --- (so that `top` and `tail` print a valid YAML stream).
func writeStructured(out io.Writer, o *cliOpts, v any) error {
	if o.output == "yaml" {
		data, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("writing yaml: %w", err)
		}
		if _, err := fmt.Fprintf(out, "---\n%s", data); err != nil {
			return fmt.Errorf("writing yaml: %w", err)
		}
		return nil
	}
	return json.NewEncoder(out).Encode(v)
}

// fmtMicros prints a duration given in microseconds, rounded for people.
func fmtMicros(us float64) string {
	d := time.Duration(us * float64(time.Microsecond))
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// fmtBytes prints n with a binary unit.
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// pct is a/b in percent, 0 when b is 0.
func pct(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * a / b
}
