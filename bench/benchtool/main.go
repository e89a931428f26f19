// Command benchtool holds the small Go helpers of bench/run.sh:
//
//	benchtool cluster  -services N -endpoints E -fixture F.yaml -queries Q.txt
//	    writes a synthetic cluster (Namespaces, Services, EndpointSlices) as
//	    YAML for `nodecache --fixture` and `kubectl create -f`, and a dnsperf
//	    query file against its zone. With -from K the YAML holds only
//	    services K..N-1 and their slices: what grows a K-service cluster
//	    already loaded into the N-service one.
//	benchtool latency  -server ADDR -queries Q.txt -rate 10000 -duration 10s
//	    open-loop fixed-rate UDP load; prints sent, answered, lost, p50, p90,
//	    p99, p99.9 and rcode counts as key=value pairs. A reply's latency
//	    ends at its arrival in the client's socket (the kernel's receive
//	    time; -rx-time=read: when the client reads it).
//	benchtool zonemem  -services 10000 -endpoints 10
//	    heap of a synced kubezone.Zone for that cluster (fake clientset).
//	benchtool slicechurn -kubeconfig F -services N -endpoints E -rate 20 -duration 60s
//	    EndpointSlice updates of that cluster, loaded into the API server of
//	    F, at a fixed rate until -duration or SIGTERM; prints updates,
//	    errors and the rate reached as key=value pairs.
//	benchtool restart -supervisors P1,P2 -servers A1,A2 -name N -rounds 10
//	    SIGKILLs each supervised agent's serving process in turn and asks N
//	    until the first answer; prints, per kill, the time from the kill to
//	    it and the CPU the new serving process had used then (bench/restart.sh).
//
// It is a harness, not part of the agent; see bench/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtool:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: benchtool cluster|latency|zonemem|slicechurn|restart [flags]")
	}
	switch args[0] {
	case "cluster":
		return runCluster(args[1:], out)
	case "latency":
		return runLatencyCmd(ctx, args[1:], out)
	case "zonemem":
		return runZoneMem(ctx, args[1:], out)
	case "slicechurn":
		return runSliceChurnCmd(ctx, args[1:], out)
	case "restart":
		return runRestartCmd(ctx, args[1:], out)
	}
	return fmt.Errorf("unknown command %q: want cluster, latency, zonemem, slicechurn or restart", args[0])
}

func clusterFlags(fs *flag.FlagSet) *clusterSpec {
	var s clusterSpec
	fs.IntVar(&s.Namespaces, "namespaces", 10, "namespaces the services are spread over")
	fs.IntVar(&s.Services, "services", 1000, "services")
	fs.IntVar(&s.Endpoints, "endpoints", 10, "ready endpoints per service")
	fs.IntVar(&s.Headless, "headless-every", 10, "every Nth service is headless (0: none)")
	return &s
}

func runCluster(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	spec := clusterFlags(fs)
	fixture := fs.String("fixture", "", "write the objects as YAML here")
	from := fs.Int("from", 0, "write only services from this index on (no namespaces unless 0): grows a cluster of that many services")
	queries := fs.String("queries", "", "write a dnsperf query file here")
	n := fs.Int("n", 100000, "query lines")
	domain := fs.String("domain", "cluster.local.", "cluster domain (FQDN)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	if *from < 0 || *from >= spec.Services {
		return fmt.Errorf("cluster: -from %d: want 0 to %d", *from, spec.Services-1)
	}
	if *fixture != "" {
		err := writeFile(*fixture, func(w io.Writer) error { return spec.writeYAML(w, *from) })
		if err != nil {
			return err
		}
	}
	if *queries != "" {
		err := writeFile(*queries, func(w io.Writer) error { return spec.writeQueries(w, *domain, *n) })
		if err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(out, "namespaces=%d services=%d endpoints=%d\n", spec.Namespaces, spec.Services, spec.Services*spec.Endpoints)
	return err
}

func writeFile(path string, fill func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if err := fill(f); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", path, err)
	}
	return nil
}

func runLatencyCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("latency", flag.ContinueOnError)
	var cfg latencyConfig
	fs.StringVar(&cfg.Server, "server", "127.0.0.1:53", "server host:port")
	fs.IntVar(&cfg.Rate, "rate", 10000, "queries per second")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long to send")
	fs.DurationVar(&cfg.Timeout, "timeout", time.Second, "a reply later than this is lost")
	fs.IntVar(&cfg.Sockets, "sockets", 8, "UDP sockets")
	rx := fs.String("rx-time", "kernel", "a reply's time: kernel (its arrival in the socket, SO_TIMESTAMPNS) or read (when the client reads it)")
	queries := fs.String("queries", "", "dnsperf query file (cycled)")
	limit := fs.Int("max-queries", 1000000, "read at most this many lines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *rx {
	case "kernel":
		cfg.KernelRx = true
	case "read":
	default:
		return fmt.Errorf("latency: -rx-time %q: want kernel or read", *rx)
	}
	qs, err := readQueryFile(*queries, *limit)
	if err != nil {
		return err
	}
	res, err := runLatency(ctx, cfg, qs)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, res.format())
	return err
}

func runZoneMem(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("zonemem", flag.ContinueOnError)
	spec := clusterFlags(fs)
	timeout := fs.Duration("timeout", 2*time.Minute, "give up when the zone has not synced by then")
	if err := fs.Parse(args); err != nil {
		return err
	}
	m, err := measureZoneMem(ctx, *spec, *timeout)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, m.format())
	return err
}
