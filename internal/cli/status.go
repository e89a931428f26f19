package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/internal/doctor"
	"github.com/nodecache/nodecache/pkg/iface"
)

// cmdStatus is `nodecache status`.
func cmdStatus(ctx context.Context, out io.Writer, args []string) error {
	var o cliOpts
	fs := newCLIFlags("status", &o)
	if _, err := parseCLI(fs, &o, args, 0, 0); err != nil {
		return err
	}
	st, err := adminapi.NewClient(o.socket).Status(ctx)
	if err != nil {
		return err
	}
	return emit(out, &o, st, func(w io.Writer) { printStatus(w, st) })
}

func printStatus(w io.Writer, st adminapi.Status) {
	state := "serving"
	if !st.Serving {
		state = "NOT serving"
	}
	ready := "ready"
	if len(st.NotReady) > 0 {
		ready = "NOT ready: " + strings.Join(st.NotReady, "; ")
	}
	fmt.Fprintf(w, "nodecache %s, up %s, %s, %s\n", st.Version, st.Uptime, state, ready)
	fmt.Fprintf(w, "listeners\t%s\n", strings.Join(st.Listeners, ", "))
	fmt.Fprintf(w, "interface\t%s\n", ifaceLine(st.Interface.Interface))
	fmt.Fprintf(w, "rules\t%s\n", rulesLine(st.Interface.Rules))
	if st.Interface.LastError != "" {
		fmt.Fprintf(w, "last error\t%s\n", st.Interface.LastError)
	}
	fmt.Fprintf(w, "zone\t%s\n", zoneLine(st))
	c := st.Cache
	budget := ""
	if n, err := strconv.ParseInt(st.Config["cache-size"], 10, 64); err == nil {
		budget = " of " + fmtBytes(n)
	}
	fmt.Fprintf(w, "cache\t%d entries, %s%s, hit rate %.1f%% (hits %d, misses %d, stale %d, evictions %d, prefetches %d)\n",
		c.Entries, fmtBytes(c.Bytes), budget, 100*c.HitRate, c.Hits, c.Misses, c.Stale, c.Evictions, c.Prefetches)
	t := st.Totals
	fmt.Fprintf(w, "queries\t%d total, %.1f%% NXDOMAIN, avg %s; by source %s\n",
		t.Queries, pct(float64(t.NXDomain), float64(t.Queries)), fmtMicros(t.AvgMicros), countsLine(t.Sources))
	fmt.Fprintf(w, "upstream\t%s\n", st.Config["upstream"])
	cfgLine := fmt.Sprintf("generation %d", st.ConfigGeneration)
	if st.ConfigError != "" {
		cfgLine += "; the last reload was REFUSED: " + st.ConfigError
	}
	fmt.Fprintf(w, "config\t%s\n", cfgLine)
	fmt.Fprintln(w)
	printUpstreams(w, st.Upstreams)
}

func ifaceLine(s iface.InterfaceStatus) string {
	switch {
	case s.State == iface.StateDisabled:
		return "not managed (--setup-interface=false)"
	case !s.Present:
		return fmt.Sprintf("%s %s: link absent", s.Name, s.State)
	}
	up := "down"
	if s.Up {
		up = "up"
	}
	line := fmt.Sprintf("%s %s (%s, %s, %s)", s.Name, s.State, s.Kind, up, doctor.JoinIPs(s.Addresses))
	if len(s.Missing) > 0 {
		line += ", missing " + doctor.JoinIPs(s.Missing)
	}
	if len(s.IPVSHeld) > 0 {
		line += ", " + iface.IPVSLinkName + " holds " + doctor.JoinIPs(s.IPVSHeld) + " (IPVS: not intercepted)"
	}
	return line
}

func rulesLine(r iface.RulesStatus) string {
	if r.State == iface.StateDisabled {
		return "not managed (--setup-iptables=false)"
	}
	var bad []string
	for _, c := range r.Chains {
		switch {
		case !c.Exists:
			bad = append(bad, fmt.Sprintf("%s %s/%s absent", c.Family, c.Table, c.Chain))
		case c.Missing > 0 || c.Extra > 0:
			bad = append(bad, fmt.Sprintf("%s %s/%s %d missing %d extra", c.Family, c.Table, c.Chain, c.Missing, c.Extra))
		case c.Jumps != 1 || !c.JumpFirst && !c.Yielded:
			bad = append(bad, fmt.Sprintf("%s %s jump to %s: %d copies, first=%t", c.Family, c.Parent, c.Chain, c.Jumps, c.JumpFirst))
		}
	}
	line := fmt.Sprintf("%s %s, %d chains", r.Backend, r.State, len(r.Chains))
	if len(bad) == 0 {
		return line + ", every jump first"
	}
	return line + ": " + strings.Join(bad, "; ")
}

func zoneLine(st adminapi.Status) string {
	z := st.Zone
	if z == nil {
		return "none (no --kubeconfig, --fixture or in-cluster config)"
	}
	sync := "synced"
	if !z.Synced {
		sync = "NOT synced"
	}
	return fmt.Sprintf("%s %s, source %s, generation %d: %d namespaces, %d services, %d endpointslices, %d endpoints, %d pods (%d local), %d names",
		st.Config["cluster-domain"], sync, z.Source, z.Generation, z.Namespaces, z.Services, z.EndpointSlices,
		z.Endpoints, z.Pods, z.LocalPods, z.Names)
}

// countsLine prints a map of counts sorted by key: "cache 3 zone 5".
func countsLine(m map[string]uint64) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// cmdUpstreams is `nodecache upstreams`.
func cmdUpstreams(ctx context.Context, out io.Writer, args []string) error {
	var o cliOpts
	fs := newCLIFlags("upstreams", &o)
	if _, err := parseCLI(fs, &o, args, 0, 0); err != nil {
		return err
	}
	rows, err := adminapi.NewClient(o.socket).Upstreams(ctx)
	if err != nil {
		return err
	}
	return emit(out, &o, rows, func(w io.Writer) { printUpstreams(w, rows) })
}

func printUpstreams(w io.Writer, rows []adminapi.Upstream) {
	fmt.Fprintln(w, "UPSTREAM\tSTATE\tLAST RTT\tREQUESTS\tERRORS\tERROR %\tFAILS IN A ROW")
	for _, r := range rows {
		state := "up"
		if !r.Up {
			state = "DOWN"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%.1f\t%d\n", r.Addr, state, fmtMicros(r.LastRTTMillis*1000),
			r.Requests, r.Errors, pct(float64(r.Errors), float64(r.Requests)), r.ConsecutiveFails)
	}
}
