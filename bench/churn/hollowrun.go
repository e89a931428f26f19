package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// hollowMeasure is the -hollow mode: for each count in c.hollow (rising),
// as many hollow agents and hollow kube-proxies in this one process, then
// a churn phase measuring the API server (CPU per update, RSS, watches)
// and the time until one new Service reaches every watcher; with -restart,
// a restart of the API server with the most watchers connected.
func hollowMeasure(ctx context.Context, c config, out io.Writer) error {
	klogFile, err := os.Create(filepath.Join(c.dir, "hollow-klog.log"))
	if err != nil {
		return fmt.Errorf("creating klog file: %w", err)
	}
	defer klogFile.Close()
	klog.LogToStderr(false)
	klog.SetOutput(klogFile) // a restart makes every reflector log its retries
	api, cl, err := startLoaded(ctx, c)
	if err != nil {
		return err
	}
	defer api.stop()
	fmt.Fprintf(out, "services=%d endpoints=%d rate=%.0f duration=%v hollow=%v\n\n", c.services, c.endpoints, c.rate,
		c.duration, c.hollow)
	fmt.Fprintln(out, "| agents + proxies | API-server CPU per update | idle CPU (cores) | RSS after churn | WATCH requests | registered watchers | one new Service reaches all: p50 / last | hollow process CPU per update | hollow process RSS |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|")
	var agents []*hollowAgent
	var proxies []*hollowProxy
	self := &proc{name: "hollow"}
	procs := map[string][]*proc{"kube-apiserver": {api.apiserver}, "hollow": {self}}
	all := func(k int) int { return (k * 7919) % c.services }
	for step, n := range append([]int{0}, c.hollow...) {
		if err := addHollow(ctx, api, c, n, &agents, &proxies); err != nil {
			return err
		}
		if _, _, err := propagation(ctx, api, agents, proxies, fmt.Sprintf("sync-%d", step), 5*time.Minute); err != nil {
			return err
		}
		logf("%d hollow agents + %d proxies synced; settling", len(agents), len(proxies))
		sleep(ctx, 5*time.Second)
		procs["kube-apiserver"] = []*proc{api.apiserver}
		idle, err := phase(ctx, c, procs, nil)
		if err != nil {
			return err
		}
		churn, err := phase(ctx, c, procs, func(ctx context.Context, k int) error {
			_, err := cl.churn(ctx, api.admin, all(k+step*100_000))
			return err
		})
		if err != nil {
			return err
		}
		watches, watchers, err := scrapeWatches(ctx, api)
		if err != nil {
			return err
		}
		rss, _, err := api.apiserver.memory()
		if err != nil {
			return err
		}
		selfRSS, _, err := self.memory()
		if err != nil {
			return err
		}
		lat, _, err := propagation(ctx, api, agents, proxies, fmt.Sprintf("marker-%d", step), 2*time.Minute)
		if err != nil {
			return err
		}
		u := float64(churn.updates)
		idleRate := idle.cpu["kube-apiserver"].Seconds() / idle.wall.Seconds()
		fmt.Fprintf(out, "| %d + %d | %.2f ms | %.3f | %.0f MiB | %s | %s | %s | %.2f ms | %.0f MiB |\n", len(agents), len(proxies),
			ms(churn.cpu["kube-apiserver"])/u, idleRate, float64(rss)/(1<<20), watches, watchers, lat,
			ms(churn.cpu["hollow"])/u, float64(selfRSS)/(1<<20))
	}
	if !c.restart {
		return nil
	}
	return hollowStorm(ctx, c, api, agents, proxies, out)
}

// addHollow starts hollow agents and proxies (as c.hollowKinds says) up to n each.
func addHollow(ctx context.Context, api *apiServer, c config, n int, agents *[]*hollowAgent, proxies *[]*hollowProxy) error {
	kinds := c.hollowKinds
	for i := len(*agents); kinds != "proxies" && i < n; i++ {
		a, err := startHollowAgent(ctx, api.restConfig, i, c.relistSpread)
		if err != nil {
			return err
		}
		*agents = append(*agents, a)
	}
	for i := len(*proxies); kinds != "agents" && i < n; i++ {
		p, err := startHollowProxy(ctx, api.restConfig, i)
		if err != nil {
			return err
		}
		*proxies = append(*proxies, p)
	}
	return nil
}

// hollowStorm restarts kube-apiserver with every hollow watcher connected:
// the new process's peak RSS, and the time until every watcher has a
// Service written as soon as the API server takes writes again.
func hollowStorm(ctx context.Context, c config, api *apiServer, agents []*hollowAgent, proxies []*hollowProxy, out io.Writer) error {
	_, before, err := api.apiserver.memory()
	if err != nil {
		return err
	}
	logf("restarting kube-apiserver with %d + %d hollow watchers (stop at %s)", len(agents), len(proxies),
		time.Now().UTC().Format(time.RFC3339Nano))
	self := &proc{name: "hollow"}
	selfCPU0, err := self.cpu()
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := api.restart(ctx); err != nil {
		return err
	}
	ready := time.Since(t0)
	lat, written, err := propagation(ctx, api, agents, proxies, "storm", 5*time.Minute)
	if err != nil {
		return err
	}
	serviceWrites := written.Sub(t0)
	total := time.Since(t0)
	var audit *stormAudit
	if c.audit { // every informer relists once: 4 per agent, 3 per proxy
		if audit, err = awaitRelists(ctx, filepath.Join(c.dir, "audit.log"), t0, 4*len(agents)+3*len(proxies)); err != nil {
			return err
		}
	}
	sleep(ctx, 10*time.Second) // relists still in flight show in the peak and the CPU
	apiCPU, err := api.apiserver.cpu()
	if err != nil {
		return err
	}
	selfCPU, err := self.cpu()
	if err != nil {
		return err
	}
	_, peak, err := api.apiserver.memory()
	if err != nil {
		return err
	}
	watches, watchers, err := scrapeWatches(ctx, api)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nkube-apiserver restarted with %d + %d hollow watchers: taking writes %.1f s after the stop began "+
		"(a Service: %.1f s); "+
		"a Service written then reached all (p50 / last) %s; every watcher in sync %.1f s after the stop began; "+
		"peak RSS of the new process %.0f MiB (old process: %.0f MiB); afterwards %s WATCH requests, %s registered watchers.\n",
		len(agents), len(proxies), ready.Seconds(), serviceWrites.Seconds(), lat, total.Seconds(), float64(peak)/(1<<20), float64(before)/(1<<20),
		watches, watchers)
	fmt.Fprintf(out, "\nCPU from the stop until 10 s after every watcher was in sync (with -audit: after the last relist): "+
		"new kube-apiserver %.1f s, hollow process %.1f s.\n",
		apiCPU.Seconds(), (selfCPU - selfCPU0).Seconds())
	lists, err := scrapeRequests(ctx, api)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nThe new process's apiserver_request_total for the watched kinds (finished requests): %s.\n", lists)
	if audit != nil {
		fmt.Fprintf(out, "\nHollow watchers' lists and watches after the stop (audit log): %s.\n", audit)
	}
	return nil
}

// propagation creates Service name and waits until every agent's zone
// answers it and every proxy's store holds it; it returns "p50 / last"
// since the write, over agents and proxies together, and when the write
// was accepted. A restarted API server may refuse a Service for a while
// (its ClusterIP allocator not synced yet): the write is retried every
// 500 ms for up to a minute, and the times count from the accepted one.
func propagation(ctx context.Context, api *apiServer, agents []*hollowAgent, proxies []*hollowProxy, name string,
	limit time.Duration) (string, time.Time, error) {
	var start time.Time
	for attempt := 1; ; attempt++ {
		start = time.Now()
		_, err := api.admin.CoreV1().Services(markerNamespace).Create(ctx, markerService(name), metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			break
		}
		if attempt == 120 || !sleep(ctx, 500*time.Millisecond) {
			return "", start, fmt.Errorf("creating marker %s: %w", name, err)
		}
		if attempt == 1 {
			logf("creating marker %s: %v; retrying", name, err)
		}
	}
	fqdn := name + "." + markerNamespace + ".svc.cluster.local."
	var checks []func() bool
	for _, a := range agents {
		checks = append(checks, func() bool { return a.has(fqdn) })
	}
	for _, p := range proxies {
		checks = append(checks, func() bool { return p.has(name) })
	}
	var seen []time.Duration
	for len(checks) > 0 {
		if time.Since(start) > limit {
			return "", start, fmt.Errorf("marker %s: %d of %d watchers without it after %v", name, len(checks),
				len(agents)+len(proxies), limit)
		}
		rest := checks[:0]
		for _, ok := range checks {
			if ok() {
				seen = append(seen, time.Since(start))
			} else {
				rest = append(rest, ok)
			}
		}
		checks = rest
		if len(checks) > 0 && !sleep(ctx, 20*time.Millisecond) {
			return "", start, ctx.Err()
		}
	}
	if len(seen) == 0 {
		return "none", start, nil
	}
	slices.Sort(seen)
	return fmt.Sprintf("%.2f s / %.2f s", seen[len(seen)/2].Seconds(), seen[len(seen)-1].Seconds()), start, nil
}

// scrapeWatches sums apiserver_longrunning_requests{verb="WATCH"} and
// apiserver_registered_watchers ("n/a" where the server has no such series).
func scrapeWatches(ctx context.Context, api *apiServer) (watches, watchers string, err error) {
	var w, r float64
	var haveW, haveR bool
	err = scrapeMetrics(ctx, api, func(line string, v float64) {
		switch {
		case strings.HasPrefix(line, "apiserver_longrunning_requests{") && strings.Contains(line, `verb="WATCH"`):
			w, haveW = w+v, true
		case strings.HasPrefix(line, "apiserver_registered_watchers{"):
			r, haveR = r+v, true
		}
	})
	watches, watchers = "n/a", "n/a"
	if haveW {
		watches = strconv.FormatFloat(w, 'f', 0, 64)
	}
	if haveR {
		watchers = strconv.FormatFloat(r, 'f', 0, 64)
	}
	return watches, watchers, err
}

// scrapeRequests sums apiserver_request_total for LIST and WATCH of the
// watched kinds by verb and code ("LIST 200: 812, WATCH 429: 40, ..."), and
// apiserver_watch_list_duration_seconds_count (streaming lists finished).
func scrapeRequests(ctx context.Context, api *apiServer) (string, error) {
	sums := map[string]float64{}
	label := func(line, name string) string {
		_, rest, ok := strings.Cut(line, name+`="`)
		if !ok {
			return ""
		}
		v, _, _ := strings.Cut(rest, `"`)
		return v
	}
	watched := map[string]bool{"services": true, "endpointslices": true, "namespaces": true, "pods": true, "nodes": true}
	err := scrapeMetrics(ctx, api, func(line string, v float64) {
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{") && watched[label(line, "resource")]:
			if verb := label(line, "verb"); verb == "LIST" || verb == "WATCH" {
				sums[verb+" "+label(line, "code")] += v
			}
		case strings.HasPrefix(line, "apiserver_watch_list_duration_seconds_count{"):
			sums["watch-lists finished"] += v
		}
	})
	keys := make([]string, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %.0f", k, sums[k]))
	}
	return strings.Join(parts, ", "), err
}

// scrapeMetrics reads the API server's /metrics with the admin token and
// calls fn with each sample line and its value.
func scrapeMetrics(ctx context.Context, api *apiServer, fn func(line string, v float64)) error {
	b, err := api.admin.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("scraping kube-apiserver metrics: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || strings.HasPrefix(line, "#") {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			fn(line, v)
		}
	}
	return sc.Err()
}
