package agent

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"
)

// targetLabels are added by Prometheus or Grafana from the scrape target,
// not served by an exporter; "up" is the series Prometheus makes per target.
var targetLabels = map[string]bool{"job": true, "instance": true, "pod": true, "namespace": true,
	"node": true, "container": true, "service": true, "endpoint": true}

// seriesLabels maps each series name on a /metrics page (histograms and
// summaries as their _bucket, _count and _sum series) to the label names
// and values it has.
type seriesLabels map[string]map[string]map[string]bool

func scrapeSeries(t *testing.T, url string) seriesLabels {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	out := seriesLabels{}
	add := func(name string, m *dto.Metric, extra ...string) {
		if out[name] == nil {
			out[name] = map[string]map[string]bool{}
		}
		set := func(l, v string) {
			if out[name][l] == nil {
				out[name][l] = map[string]bool{}
			}
			out[name][l][v] = true
		}
		for _, lp := range m.GetLabel() {
			set(lp.GetName(), lp.GetValue())
		}
		for _, l := range extra {
			set(l, "")
		}
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(name+"_bucket", m, "le")
				for _, b := range m.GetHistogram().GetBucket() {
					out[name+"_bucket"]["le"][strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)] = true
				}
				add(name+"_count", m)
				add(name+"_sum", m)
			case dto.MetricType_SUMMARY:
				add(name, m, "quantile")
				add(name+"_count", m)
				add(name+"_sum", m)
			default:
				add(name, m)
			}
		}
	}
	return out
}

// ruleExprs reads the expressions of a rules file (groups[].rules[].expr)
// or of a .promql file (one a line, # comments) and the allow-grouping
// directives of the latter: metric -> labels its by clauses may name
// although CoreDNS itself does not serve them there.
func ruleExprs(t *testing.T, path string) ([]string, map[string][]string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	allow := map[string][]string{}
	if strings.HasSuffix(path, ".yaml") {
		var rf struct {
			Groups []struct {
				Rules []struct {
					Expr string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		}
		if err := yaml.Unmarshal(data, &rf); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var exprs []string
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				exprs = append(exprs, r.Expr)
			}
		}
		return exprs, allow
	}
	var exprs []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "# allow-grouping "); ok {
			f := strings.Fields(rest)
			allow[f[0]] = append(allow[f[0]], f[1:]...)
		}
		if line != "" && !strings.HasPrefix(line, "#") {
			exprs = append(exprs, line)
		}
	}
	return exprs, allow
}

// compatAgent is a running agent's DNS and metrics addresses.
type compatAgent struct{ dns, metrics string }

func startCompatAgent(t *testing.T) compatAgent {
	t.Helper()
	up := startUpstream(t)
	port := freePort(t)
	cfg := testAgentConfig(t, up.Addr, t.TempDir(), port, "--node-name", "node-a") // the fixture's node of demo/web-1
	startAgent(t, cfg)
	return compatAgent{dns: fmt.Sprintf("127.0.0.1:%d", port), metrics: cfg.MetricsAddr}
}

// TestCoreDNSDashboardsAndAlertsFindTheirSeries runs an agent, sends it
// traffic of every kind the community's CoreDNS and node-local-dns alerts
// and dashboards look at (cluster zone, cache hit, miss, NXDOMAIN, an
// upstream SERVFAIL, TCP, DO), then checks that every series and every
// label their expressions select exists on /metrics, and every label value
// an equality matcher asks for.
func TestCoreDNSDashboardsAndAlertsFindTheirSeries(t *testing.T) {
	ca := startCompatAgent(t)
	for _, q := range []struct {
		name  string
		qtype uint16
		tcp   bool
	}{
		{"web.demo.svc.cluster.local.", dns.TypeA, false},
		{"www.example.org.", dns.TypeA, false},
		{"www.example.org.", dns.TypeA, false},
		{"www.example.org.", dns.TypeAAAA, true},
		{"nx.example.org.", dns.TypeA, false},
		{"servfail.example.org.", dns.TypeA, false},
	} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		m.SetEdns0(1232, true)
		c := &dns.Client{}
		if q.tcp {
			c.Net = "tcp"
		}
		if _, _, err := c.Exchange(m, ca.dns); err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
	}
	series := scrapeSeries(t, "http://"+ca.metrics+"/metrics")
	// CoreDNS's buckets (plugin.TimeBuckets and the size buckets of
	// plugin/metrics/vars), written out as its sources give them.
	timeBuckets := "0.00025 0.0005 0.001 0.002 0.004 0.008 0.016 0.032 0.064 0.128 0.256 0.512 1.024 2.048 4.096 8.192"
	sizeBuckets := "0 100 200 300 400 511 1023 2047 4095 8291 16000 32000 48000 64000"
	for name, want := range map[string]string{
		"coredns_dns_request_duration_seconds_bucket":     timeBuckets,
		"coredns_proxy_request_duration_seconds_bucket":   timeBuckets,
		"coredns_forward_request_duration_seconds_bucket": timeBuckets,
		"coredns_dns_request_size_bytes_bucket":           sizeBuckets,
		"coredns_dns_response_size_bytes_bucket":          sizeBuckets,
	} {
		var got []string
		for le := range series[name]["le"] {
			if le != "" && le != "+Inf" {
				got = append(got, le)
			}
		}
		slices.SortFunc(got, func(a, b string) int {
			x, _ := strconv.ParseFloat(a, 64)
			y, _ := strconv.ParseFloat(b, 64)
			return cmp.Compare(x, y)
		})
		if strings.Join(got, " ") != want {
			t.Errorf("%s: got buckets %v, want CoreDNS's %s", name, got, want)
		}
	}
	files, err := filepath.Glob("testdata/compat/*")
	if err != nil || len(files) < 4 {
		t.Fatalf("compat testdata: got %v (%v), want the 4 files", files, err)
	}
	for _, path := range files {
		exprs, allow := ruleExprs(t, path)
		if len(exprs) == 0 {
			t.Errorf("%s: no expressions", path)
		}
		for _, expr := range exprs {
			for _, problem := range checkExpr(expr, series, allow) {
				t.Errorf("%s: %s\n\tin %s", filepath.Base(path), problem, strings.TrimSpace(expr))
			}
		}
	}
}

// checkExpr returns what expr selects that series lacks.
func checkExpr(expr string, series seriesLabels, allow map[string][]string) []string {
	refs, err := extractRefs(expr)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	selected := map[string]bool{} // label names of the selected series
	for _, sel := range refs.selectors {
		if sel.name == "up" {
			continue // made by Prometheus per target
		}
		labels, ok := series[sel.name]
		if !ok {
			problems = append(problems, fmt.Sprintf("series %s is missing", sel.name))
			continue
		}
		for l := range labels {
			selected[l] = true
		}
		for _, l := range allow[sel.name] {
			selected[l] = true
		}
		for _, m := range sel.matchers {
			if targetLabels[m.label] || m.label == "__name__" {
				continue
			}
			values, ok := labels[m.label]
			switch {
			case !ok:
				problems = append(problems, fmt.Sprintf("series %s has no label %s", sel.name, m.label))
			case m.op == "=" && !values[m.value]:
				problems = append(problems, fmt.Sprintf("series %s has no %s=%q after the test's traffic", sel.name, m.label, m.value))
			}
		}
	}
	for _, l := range refs.grouping {
		if !targetLabels[l] && !selected[l] && len(refs.selectors) > 0 {
			problems = append(problems, fmt.Sprintf("no selected series has the label %s it is grouped by", l))
		}
	}
	return problems
}

// TestDeployRulesAndDashboardFindTheirSeries checks deploy/monitoring's
// alerts and deploy/grafana-dashboard.json the same way: every series and
// label they select exists on the agent's /metrics after traffic, but for
// the series that only appear with an event (listed with the event).
func TestDeployRulesAndDashboardFindTheirSeries(t *testing.T) {
	ca := startCompatAgent(t)
	for _, name := range []string{"web.demo.svc.cluster.local.", "www.example.org.", "servfail.example.org."} {
		ask(t, ca.dns, name, dns.TypeA)
	}
	series := scrapeSeries(t, "http://"+ca.metrics+"/metrics")
	for name, event := range map[string]string{
		"nodecache_server_dropped_total": "a query dropped or refused at the edge",
		"nodecache_handovers_total":      "a handover",
		"nodecache_memory_limit_bytes":   "a cgroup memory limit or GOMEMLIMIT to report",
	} {
		if _, ok := series[name]; ok {
			t.Logf("%s is exported already: its exception (%s) is not needed here", name, event)
			continue
		}
		series[name] = map[string]map[string]bool{"source": {"cgroup": true, "gomemlimit": true},
			"reason": {}, "from": {}, "direction": {}, "le": {}}
	}
	data, err := os.ReadFile("../../deploy/monitoring/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
					Expr  string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	if len(exprs) < 7 {
		t.Errorf("prometheusrule.yaml: got %d alerts, want at least the 7 kinds", len(exprs))
	}
	data, err = os.ReadFile("../../deploy/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	grafana := strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h", "$__interval", "1m")
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, grafana.Replace(tg.Expr))
		}
	}
	for _, expr := range exprs {
		for _, problem := range checkExpr(expr, series, nil) {
			t.Errorf("%s\n\tin %s", problem, strings.TrimSpace(expr))
		}
	}
}
