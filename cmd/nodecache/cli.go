package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"
)

// The troubleshooting CLI: every command but `run` and `doctor` is a thin
// client of the admin API (admin.go) that prints a table, or with -o json
// the data itself for scripts.

// cliFunc is one CLI command: it parses args, talks to the agent and writes
// its report to out. ctx ends on SIGINT/SIGTERM.
type cliFunc func(ctx context.Context, out io.Writer, args []string) error

// cliTable maps command names to their implementations.
func cliTable() map[string]cliFunc {
	return map[string]cliFunc{
		"status":    cmdStatus,
		"upstreams": cmdUpstreams,
		"query":     cmdQuery,
		"explain":   cmdExplain,
		"cache":     cmdCache,
		"zone":      cmdZone,
		"top":       cmdTop,
		"doctor":    cmdDoctor,
		"reload":    cmdReload,
	}
}

// cliCommands returns the commands main dispatches to, each bound to
// stdout and to a context that ends on Ctrl-C.
func cliCommands() map[string]func(args []string) error {
	out := make(map[string]func([]string) error)
	for name, fn := range cliTable() {
		out[name] = func(args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return fn(ctx, os.Stdout, args)
		}
	}
	return out
}

// errFindings is returned by commands whose report holds failures (doctor),
// so that the exit status is non-zero after the report was printed.
var errFindings = errors.New("problems found")

// cliOpts are the flags every CLI command takes.
type cliOpts struct {
	socket string
	output string // "text" or "json"
}

// newCLIFlags returns a flag set with the common flags registered on o.
func newCLIFlags(name string, o *cliOpts) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr) // -h and flag errors print the flag list there
	fs.StringVar(&o.socket, "admin-socket", "/run/nodecache/admin.sock", "the agent's admin socket")
	fs.StringVar(&o.output, "o", "text", "output format: text or json")
	return fs
}

// parseCLI parses args with flags and positional arguments in any order
// (`query web A -o json` as well as `query -o json web A`) and returns the
// positional ones, checked against min and max (max < 0: no limit).
func parseCLI(fs *flag.FlagSet, o *cliOpts, args []string, minArgs, maxArgs int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%s: %w", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if o.output != "text" && o.output != "json" {
		return nil, fmt.Errorf("%s: -o %q: want text or json", fs.Name(), o.output)
	}
	if len(pos) < minArgs || (maxArgs >= 0 && len(pos) > maxArgs) {
		return nil, fmt.Errorf("%s: got %d arguments, want %s (see nodecache help)", fs.Name(), len(pos), argRange(minArgs, maxArgs))
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

// emit writes v as indented JSON when o asks for it, else calls text.
func emit(out io.Writer, o *cliOpts, v any, text func(w io.Writer)) error {
	if o.output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return fmt.Errorf("writing json: %w", err)
		}
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	text(tw)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
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
