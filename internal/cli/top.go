package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/nodecache/nodecache/internal/adminapi"
)

// topView is what `nodecache top` shows: rates over one interval.
type topView struct {
	Interval      string             `json:"interval"`
	QPS           float64            `json:"qps"`
	NXDomainRate  float64            `json:"nxdomain_per_second"`
	AvgMicros     float64            `json:"avg_latency_us"`
	Rcodes        map[string]float64 `json:"rcode_percent"`
	Sources       map[string]float64 `json:"source_percent"`
	ByQueries     []clientRate       `json:"top_by_queries"`
	ByNXDomain    []clientRate       `json:"top_by_nxdomain"`
	ActiveClients int                `json:"active_clients"`
}

// clientRate is one client's rates over the interval.
type clientRate struct {
	IP           string  `json:"ip"`
	Pod          string  `json:"pod,omitempty"`
	QPS          float64 `json:"qps"`
	NXDomainRate float64 `json:"nxdomain_per_second"`
	AvgMicros    float64 `json:"avg_latency_us"`
}

// topClientsFetched is how many clients each sample asks for: all the agent
// tracks (newClientStats' bound), so that rates are exact.
const topClientsFetched = 4096

// topRates turns two samples into rates; n bounds each client list. A
// client missing from prev counts from zero; counters that went down (the
// agent restarted) count from zero too.
func topRates(prev, cur adminapi.Top, n int) (topView, error) {
	dt := cur.Time.Sub(prev.Time)
	if dt <= 0 {
		return topView{}, fmt.Errorf("samples %s apart: want the second later", dt)
	}
	secs := dt.Seconds()
	base := map[string]adminapi.ClientRow{}
	for _, r := range prev.Clients {
		base[r.IP] = r
	}
	v := topView{Interval: dt.Round(time.Millisecond).String(), Rcodes: map[string]float64{}, Sources: map[string]float64{}}
	dq, dnx, lat := deltaRow(adminapi.ClientRow{Queries: prev.Totals.Queries, NXDomain: prev.Totals.NXDomain, AvgMicros: prev.Totals.AvgMicros},
		adminapi.ClientRow{Queries: cur.Totals.Queries, NXDomain: cur.Totals.NXDomain, AvgMicros: cur.Totals.AvgMicros})
	v.QPS, v.NXDomainRate, v.AvgMicros = float64(dq)/secs, float64(dnx)/secs, lat
	deltaShares(v.Rcodes, prev.Totals.Rcodes, cur.Totals.Rcodes)
	deltaShares(v.Sources, prev.Totals.Sources, cur.Totals.Sources)
	var rates []clientRate
	for _, r := range cur.Clients {
		dq, dnx, lat := deltaRow(base[r.IP], r)
		if dq == 0 {
			continue
		}
		rates = append(rates, clientRate{IP: r.IP, Pod: r.Pod, QPS: float64(dq) / secs, NXDomainRate: float64(dnx) / secs, AvgMicros: lat})
	}
	v.ActiveClients = len(rates)
	v.ByQueries = topBy(rates, n, func(c clientRate) float64 { return c.QPS })
	v.ByNXDomain = topBy(rates, n, func(c clientRate) float64 { return c.NXDomainRate })
	return v, nil
}

// deltaRow is the queries, NXDOMAINs and mean latency between a and b.
func deltaRow(a, b adminapi.ClientRow) (dq, dnx uint64, avgMicros float64) {
	if b.Queries < a.Queries || b.NXDomain < a.NXDomain {
		a = adminapi.ClientRow{}
	}
	dq, dnx = b.Queries-a.Queries, b.NXDomain-a.NXDomain
	if dq > 0 {
		avgMicros = (b.AvgMicros*float64(b.Queries) - a.AvgMicros*float64(a.Queries)) / float64(dq)
	}
	return dq, dnx, max(avgMicros, 0)
}

// deltaShares fills out with each key's share, in percent, of the growth
// from prev to cur.
func deltaShares(out map[string]float64, prev, cur map[string]uint64) {
	var sum uint64
	d := map[string]uint64{}
	for k, c := range cur {
		if p := prev[k]; c > p {
			d[k] = c - p
			sum += c - p
		}
	}
	for k, x := range d {
		out[k] = pct(float64(x), float64(sum))
	}
}

// topBy returns the n clients with the highest key, non-zero only.
func topBy(rates []clientRate, n int, key func(clientRate) float64) []clientRate {
	out := []clientRate{}
	for _, r := range rates {
		if key(r) > 0 {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if key(out[i]) != key(out[j]) {
			return key(out[i]) > key(out[j])
		}
		return out[i].IP < out[j].IP
	})
	return out[:min(n, len(out))]
}

// cmdTop is `nodecache top [--once] [--interval D] [-n N]`.
func cmdTop(ctx context.Context, out io.Writer, args []string) error {
	var o cliOpts
	var once bool
	var interval time.Duration
	var n int
	fs := newCLIFlags("top", &o)
	fs.BoolVar(&once, "once", false, "print one sample (two snapshots one interval apart) and exit")
	fs.DurationVar(&interval, "interval", 2*time.Second, "refresh period")
	fs.IntVar(&n, "n", 10, "clients per table")
	if _, err := parseCLI(fs, &o, args, 0, 0); err != nil {
		return err
	}
	if interval <= 0 || n <= 0 {
		return usageErrorf("top: --interval and -n must be positive")
	}
	c := adminapi.NewClient(o.socket)
	fetch := func() (adminapi.Top, error) { return c.Top(ctx, topClientsFetched) }
	prev, err := fetch()
	if err != nil {
		return err
	}
	clearScreen := !once && o.output == "text" && isTerminal(out)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil // Ctrl-C ends the live view
		case <-tick.C:
		}
		cur, err := fetch()
		if errors.Is(err, context.Canceled) {
			return nil
		} else if err != nil {
			return err
		}
		v, err := topRates(prev, cur, n)
		if err != nil {
			return fmt.Errorf("top: %w", err)
		}
		prev = cur
		if clearScreen {
			fmt.Fprint(out, "\033[H\033[2J")
		}
		if err := emit(out, &o, v, func(w io.Writer) { printTop(w, v) }); err != nil || once {
			return err
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func printTop(w io.Writer, v topView) {
	fmt.Fprintf(w, "%.1f queries/s, %.1f NXDOMAIN/s, avg %s over %s, %d active clients\n",
		v.QPS, v.NXDomainRate, fmtMicros(v.AvgMicros), v.Interval, v.ActiveClients)
	fmt.Fprintf(w, "rcodes\t%s\n", sharesLine(v.Rcodes))
	fmt.Fprintf(w, "sources\t%s\n", sharesLine(v.Sources))
	for _, t := range []struct {
		title string
		rows  []clientRate
	}{{"TOP BY QUERIES", v.ByQueries}, {"TOP BY NXDOMAIN", v.ByNXDomain}} {
		fmt.Fprintf(w, "\n%s\tPOD\tQPS\tNXDOMAIN/S\tAVG\n", t.title)
		for _, r := range t.rows {
			pod := r.Pod
			if pod == "" {
				pod = "-"
			}
			fmt.Fprintf(w, "%s\t%s\t%.1f\t%.1f\t%s\n", r.IP, pod, r.QPS, r.NXDomainRate, fmtMicros(r.AvgMicros))
		}
	}
}

func sharesLine(m map[string]float64) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || (m[keys[i]] == m[keys[j]] && keys[i] < keys[j]) })
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %.1f%%", k, m[k])
	}
	return s
}
