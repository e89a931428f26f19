package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sync/errgroup"
)

// dnsPort is the port every watcher serves on, each on its own loopback IP.
const dnsPort = 5353

// phaseResult is one phase's CPU per kind of process.
type phaseResult struct {
	updates int
	wall    time.Duration
	cpu     map[string]time.Duration // kind → CPU summed over its processes
}

// startLoaded starts etcd and kube-apiserver and loads the synthetic
// cluster into them; the caller stops the API server.
func startLoaded(ctx context.Context, c config) (*apiServer, *cluster, error) {
	logf("starting etcd and kube-apiserver from %s", c.binDir)
	var extra []string
	if c.audit {
		var err error
		if extra, err = auditArgs(c.dir); err != nil {
			return nil, nil, err
		}
	}
	api, err := startAPIServer(ctx, c.binDir, c.dir, extra...)
	if err != nil {
		return nil, nil, err
	}
	cl := &cluster{services: c.services, endpoints: c.endpoints, headlessEvery: c.headlessEvery}
	t0 := time.Now()
	if err := cl.load(ctx, api.admin); err != nil {
		api.stop()
		return nil, nil, err
	}
	logf("loaded %d services x %d endpoints in %v", c.services, c.endpoints, time.Since(t0).Round(time.Second))
	return api, cl, nil
}

func measure(ctx context.Context, c config, out io.Writer) error {
	api, cl, err := startLoaded(ctx, c)
	if err != nil {
		return err
	}
	defer api.stop()

	var ws []*watcher
	defer func() {
		for _, w := range ws {
			w.p.stop()
		}
	}()
	for i := range c.watchers {
		flags := c.nodecacheFlags
		if c.pprof {
			flags = append(slices.Clip(flags), "--pprof", fmt.Sprintf("--metrics-addr=127.0.1.%d:9253", i+1),
				fmt.Sprintf("--pprof-addr=127.0.1.%d:6053", i+1))
		}
		w, err := startNodecache(c.nodecache, c.dir, api.kubeconfig, i, dnsPort, flags)
		if err != nil {
			return err
		}
		ws = append(ws, w)
		if c.coredns != "" {
			if w, err = startCoreDNS(c.coredns, c.dir, api.kubeconfig, i, dnsPort, c.pprof); err != nil {
				return err
			}
			ws = append(ws, w)
		}
	}
	last := cl.fqdn(c.services - 1)
	for _, w := range ws {
		if err := w.waitSynced(ctx, last, 5*time.Minute); err != nil {
			return err
		}
	}
	logf("%d watchers synced; settling", len(ws))
	sleep(ctx, 5*time.Second)

	procs := map[string][]*proc{"kube-apiserver": {api.apiserver}, "etcd": {api.etcd}}
	for _, w := range ws {
		procs[w.kind] = append(procs[w.kind], w.p)
	}
	idle, err := phase(ctx, c, procs, nil)
	if err != nil {
		return err
	}
	logf("idle phase done; churn phase: %.0f updates/s for %v", c.rate, c.duration)
	all := func(k int) int { return (k * 7919) % c.services } // spread over services and namespaces
	churn, err := phase(ctx, c, procs, func(ctx context.Context, k int) error {
		_, err := cl.churn(ctx, api.admin, all(k))
		return err
	})
	if err != nil {
		return err
	}
	logf("churn phase done (%d updates); latency phase", churn.updates)
	lat := map[string][]time.Duration{}
	var latMu sync.Mutex
	var probes sync.WaitGroup
	headless := func(k int) int { return (all(k) / c.headlessEvery) * c.headlessEvery }
	latPhase, err := phase(ctx, c, procs, func(ctx context.Context, k int) error {
		i := headless(k)
		start := time.Now()
		ip, err := cl.churn(ctx, api.admin, i)
		if err != nil {
			return err
		}
		for _, w := range ws {
			probes.Go(func() {
				d := waitAnswer(ctx, w, cl.fqdn(i), ip, start, c.poll, 10*time.Second)
				latMu.Lock()
				lat[w.kind] = append(lat[w.kind], d)
				latMu.Unlock()
			})
		}
		return nil
	})
	probes.Wait()
	if err != nil {
		return err
	}
	logf("latency phase done (%d updates)", latPhase.updates)
	if err := report(out, c, procs, idle, churn, lat); err != nil {
		return err
	}
	if !c.restart {
		return nil
	}
	return restartPhase(ctx, api, cl, ws, out)
}

// restartPhase restarts kube-apiserver, then writes one update as soon as
// it takes writes and measures how long each watcher takes to answer it:
// the time until every watcher has re-established its watches (client-go's
// backoff) and is in sync again. The answers meanwhile come from what each
// watcher last knew.
func restartPhase(ctx context.Context, api *apiServer, cl *cluster, ws []*watcher, out io.Writer) error {
	logf("restarting kube-apiserver")
	t0 := time.Now()
	if err := api.restart(ctx); err != nil {
		return err
	}
	ready := time.Since(t0)
	start := time.Now()
	ip, err := cl.churn(ctx, api.admin, 0) // service 0 is headless
	if err != nil {
		return err
	}
	lat := map[string][]time.Duration{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			d := waitAnswer(ctx, w, cl.fqdn(0), ip, start, 50*time.Millisecond, 2*time.Minute)
			mu.Lock()
			lat[w.kind] = append(lat[w.kind], d)
			mu.Unlock()
		})
	}
	wg.Wait()
	_, peak, err := api.apiserver.memory()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nkube-apiserver restarted: taking writes again %.1f s after the stop began, peak RSS of the new process %.0f MiB.\n",
		ready.Seconds(), float64(peak)/(1<<20))
	fmt.Fprintln(out, "An update written then reached each watcher after (p50 / max / never within 2 min):")
	for _, kind := range []string{"nodecache", "coredns"} {
		ds := lat[kind]
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		never := 0
		for len(ds) > 0 && ds[0] < 0 {
			ds, never = ds[1:], never+1
		}
		if len(ds) == 0 {
			fmt.Fprintf(out, "- %s: none of %d\n", kind, never)
			continue
		}
		fmt.Fprintf(out, "- %s: %.1f s / %.1f s / %d of %d\n", kind, ds[len(ds)/2].Seconds(), ds[len(ds)-1].Seconds(),
			never, len(ds)+never)
	}
	return nil
}

// phase runs update (nil: none) at c.rate for c.duration, then waits 3 s
// for the watchers to finish, and returns the CPU each kind of process
// used meanwhile.
func phase(ctx context.Context, c config, procs map[string][]*proc, update func(context.Context, int) error) (phaseResult, error) {
	before := map[string]time.Duration{}
	for k, ps := range procs {
		d, err := cpuOf(ps)
		if err != nil {
			return phaseResult{}, err
		}
		before[k] = d
	}
	start := time.Now()
	res := phaseResult{cpu: map[string]time.Duration{}}
	tick := time.NewTicker(time.Duration(float64(time.Second) / c.rate))
	defer tick.Stop()
	end := time.After(c.duration)
	// Updates go out on the ticker, up to 16 at once: one write can take
	// longer than the interval on a loaded machine.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
loop:
	for {
		select {
		case <-gctx.Done():
			break loop
		case <-end:
			break loop
		case <-tick.C:
			if update == nil {
				continue
			}
			k := res.updates
			res.updates++
			g.Go(func() error { return update(gctx, k) })
		}
	}
	if err := g.Wait(); err != nil {
		return res, err
	}
	sleep(ctx, 3*time.Second)
	res.wall = time.Since(start)
	for k, ps := range procs {
		d, err := cpuOf(ps)
		if err != nil {
			return res, err
		}
		res.cpu[k] = d - before[k]
	}
	return res, nil
}

// waitAnswer polls w until it answers name with ip, and returns the time
// since start (-1 when it did not within limit).
func waitAnswer(ctx context.Context, w *watcher, name, ip string, start time.Time, poll, limit time.Duration) time.Duration {
	c := &dns.Client{Timeout: time.Second}
	for time.Since(start) < limit {
		if w.has(ctx, c, name, ip) {
			return time.Since(start)
		}
		if !sleep(ctx, poll) {
			break
		}
	}
	return -1
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

func report(out io.Writer, c config, procs map[string][]*proc, idle, churn phaseResult, lat map[string][]time.Duration) error {
	fmt.Fprintf(out, "services=%d endpoints=%d watchers=%d rate=%.0f duration=%v updates=%d\n",
		c.services, c.endpoints, c.watchers, c.rate, c.duration, churn.updates)
	fmt.Fprintln(out, "\n| process | count | CPU per update per process (churn) | same, idle baseline subtracted | idle CPU | RSS (mean) | peak RSS (mean) | update → answer p50 | p99 | missed |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|")
	for _, kind := range []string{"nodecache", "coredns", "kube-apiserver", "etcd"} {
		ps := procs[kind]
		if len(ps) == 0 {
			continue
		}
		n := time.Duration(len(ps))
		per := churn.cpu[kind] / n / time.Duration(max(churn.updates, 1))
		// The idle phase lasted as long as the churn phase: subtract it.
		net := (churn.cpu[kind] - idle.cpu[kind]) / n / time.Duration(max(churn.updates, 1))
		var rss, peak int64
		for _, p := range ps {
			r, h, err := p.memory()
			if err != nil {
				return err
			}
			rss, peak = rss+r, peak+h
		}
		p50, p99, missed := "", "", ""
		if ds := lat[kind]; len(ds) > 0 {
			p50, p99, missed = percentiles(ds)
		}
		fmt.Fprintf(out, "| %s | %d | %.3f ms | %.3f ms | %.2f%% of a core | %.1f MiB | %.1f MiB | %s | %s | %s |\n",
			kind, len(ps), ms(per), ms(net), 100*idle.cpu[kind].Seconds()/idle.wall.Seconds()/float64(len(ps)),
			float64(rss)/float64(len(ps))/(1<<20), float64(peak)/float64(len(ps))/(1<<20), p50, p99, missed)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentiles of the answered probes, and how many never saw the change.
func percentiles(ds []time.Duration) (p50, p99, missed string) {
	var ok []time.Duration
	for _, d := range ds {
		if d >= 0 {
			ok = append(ok, d)
		}
	}
	missed = fmt.Sprintf("%d of %d", len(ds)-len(ok), len(ds))
	if len(ok) == 0 {
		return "-", "-", missed
	}
	slices.Sort(ok)
	at := func(q float64) string { return fmt.Sprintf("%.0f ms", ms(ok[min(len(ok)-1, int(q*float64(len(ok))))])) }
	return at(0.50), at(0.99), missed
}
