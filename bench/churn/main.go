// Command churn measures what EndpointSlice churn costs the processes that
// watch it: one etcd and kube-apiserver on loopback, a synthetic cluster of
// -services services with one -endpoints EndpointSlice each, -watchers
// nodecache agents and as many CoreDNS processes (kubernetes plugin) all
// watching it, then a fixed -rate of slice updates (an endpoint replaced by
// a new address, as in a rollout) for -duration.
//
// Three phases of -duration each: idle (the baseline CPU of every process),
// churn (CPU per update per watcher from /proc/PID/stat, without any DNS
// query), and latency (the same churn on headless services, each update
// followed by polling every watcher every -poll until its answer holds the
// new address: the time from the update's write to the changed answer).
// With -restart, kube-apiserver is then stopped and started again, and one
// update written as soon as it takes writes is timed to every watcher: how
// long each takes to be in sync again. It prints key=value lines and a
// Markdown table; bench/churn.sh runs it.
//
// With -hollow "50 100 200" it measures the API server instead (hollow.go,
// hollowrun.go): at each count, that many hollow agents (pkg/kubezone's
// Zone.Run, each on its own connection, node-local pods included) and as
// many kube-proxy-shaped watchers (Services, EndpointSlices, their own
// Node) run in this process; the API server's CPU per update, RSS and
// watch count under churn, and the time until a new Service reaches every
// watcher. With -restart, the API server is then restarted with all of them
// connected: its new peak RSS and the time until every watcher is in sync.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	binDir, nodecache, coredns, dir string
	nodecacheFlags                  []string // extra flags for every agent
	pprof, restart, audit           bool
	services, endpoints, watchers   int
	headlessEvery                   int
	rate                            float64
	duration, poll                  time.Duration
	hollow                          []int         // -hollow: rising counts of hollow agents (and as many proxies)
	hollowKinds                     string        // -hollow-kinds: both, agents or proxies
	relistSpread                    time.Duration // -relist-spread: the hollow agents' kubezone.Config.RelistSpread
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "churn:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	var c config
	fs := flag.NewFlagSet("churn", flag.ContinueOnError)
	fs.StringVar(&c.binDir, "bin-dir", "", "directory holding etcd and kube-apiserver")
	fs.StringVar(&c.nodecache, "nodecache", "bin/nodecache", "nodecache binary")
	fs.Func("nodecache-flag", "extra flag for every agent, e.g. -nodecache-flag=--pprof (repeatable)", func(v string) error {
		c.nodecacheFlags = append(c.nodecacheFlags, v)
		return nil
	})
	fs.BoolVar(&c.pprof, "pprof", false, "serve pprof: agent i on 127.0.1.<i+1>:6053, CoreDNS i on 127.0.2.<i+1>:9253")
	fs.BoolVar(&c.restart, "restart", false, "at the end, restart kube-apiserver and measure how long each watcher takes to answer an update written then")
	fs.BoolVar(&c.audit, "audit", false, "hollow mode: kube-apiserver writes an audit log of lists and watches (dir/audit.log); "+
		"the restart storm then counts the watchers' LISTs, watch-lists and resumed watches from it")
	fs.StringVar(&c.coredns, "coredns", "", "CoreDNS binary (empty: nodecache agents only)")
	fs.StringVar(&c.dir, "dir", "", "work directory for logs, data and configs")
	fs.IntVar(&c.services, "services", 1000, "services, one EndpointSlice each")
	fs.IntVar(&c.endpoints, "endpoints", 10, "ready endpoints per slice")
	fs.IntVar(&c.headlessEvery, "headless-every", 5, "every Nth service is headless (its A answer lists the endpoints)")
	fs.IntVar(&c.watchers, "watchers", 10, "nodecache agents, and as many CoreDNS processes")
	fs.Float64Var(&c.rate, "rate", 20, "EndpointSlice updates per second")
	fs.DurationVar(&c.duration, "duration", 20*time.Second, "length of each phase")
	fs.DurationVar(&c.poll, "poll", 5*time.Millisecond, "latency phase: how often each watcher is asked")
	fs.Func("hollow", "hollow mode: space-separated rising counts of hollow agents and as many kube-proxy-shaped watchers, "+
		"all in this process, e.g. \"50 100 200\" (-nodecache, -coredns and -watchers are then unused)", func(v string) error {
		for _, f := range strings.Fields(v) {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 || (len(c.hollow) > 0 && n <= c.hollow[len(c.hollow)-1]) {
				return fmt.Errorf("want rising positive counts, got %q", v)
			}
			c.hollow = append(c.hollow, n)
		}
		return nil
	})
	fs.StringVar(&c.hollowKinds, "hollow-kinds", "both", "hollow mode: which watchers to run: both, agents or proxies")
	fs.DurationVar(&c.relistSpread, "relist-spread", 0, "hollow mode: the agents' relist spread "+
		"(kubezone.Config.RelistSpread; 0: its default, negative: none)")
	auditLog := fs.String("audit-summary", "", "print the restart summary of this kube-apiserver audit log (from -audit) and exit")
	auditSince := fs.String("audit-since", "", "with -audit-summary: when the stop began, RFC 3339")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *auditLog != "" {
		since, err := time.Parse(time.RFC3339Nano, *auditSince)
		if err != nil {
			return fmt.Errorf("-audit-since: %w", err)
		}
		a, err := readStormAudit(*auditLog, since)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "Hollow watchers' lists and watches after the stop (audit log): %s.\n", a)
		return nil
	}
	switch {
	case c.binDir == "" || c.dir == "":
		return errors.New("-bin-dir and -dir are required")
	case c.services < 1 || c.endpoints < 1 || c.watchers < 1 || c.watchers > 250 || c.headlessEvery < 1:
		return errors.New("-services, -endpoints, -headless-every want >= 1, -watchers 1..250")
	case c.hollowKinds != "both" && c.hollowKinds != "agents" && c.hollowKinds != "proxies":
		return fmt.Errorf("-hollow-kinds %q: want both, agents or proxies", c.hollowKinds)
	case c.rate <= 0 || c.duration <= 0 || c.poll <= 0:
		return errors.New("-rate, -duration and -poll must be positive")
	}
	if err := os.MkdirAll(c.dir, 0o750); err != nil {
		return fmt.Errorf("creating %s: %w", c.dir, err)
	}
	if len(c.hollow) > 0 {
		return hollowMeasure(ctx, c, out)
	}
	return measure(ctx, c, out)
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s churn: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, a...))
}
