package agent

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodecache/nodecache/internal/gendocs"
)

// docs/metrics.md is generated from the registry of an in-process agent;
// TestMetricsDoc fails when the committed page drifts. `make docs` runs it
// with -update-docs.

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/metrics.md from the code")

func TestMetricsDoc(t *testing.T) {
	up := startUpstream(t)
	port := freePort(t)
	dir := t.TempDir()
	// Every optional feature that registers metrics of its own is on, so
	// that the page lists every metric the agent can export; the check
	// below fails when a declared one is missing.
	ta := startAgent(t, testAgentConfig(t, up.Addr, dir, port,
		"--dnstap", "unix://"+filepath.Join(dir, "dnstap.sock")))
	// The Go and process collectors are the client library's own.
	ms, err := gendocs.Describe(ta.agent().reg, "go_", "process_")
	if err != nil {
		t.Fatal(err)
	}
	types, err := gendocs.SourceTypes("../../cmd", "../../pkg", "../../internal")
	if err != nil {
		t.Fatal(err)
	}
	gendocs.FillTypes(ms, types)
	exported := map[string]bool{}
	for _, m := range ms {
		exported[m.Name] = true
	}
	declared, err := gendocs.SourceNames("../../cmd", "../../pkg", "../../internal")
	if err != nil {
		t.Fatal(err)
	}
	for name := range declared {
		if !exported[name] {
			t.Errorf("%s is declared in the code but the doc agent does not export it: turn its feature on in TestMetricsDoc", name)
		}
	}
	for _, m := range ms {
		if m.Type == "" {
			t.Errorf("%s: no sample in a fresh agent and no literal name in a prometheus.*Opts, so its type is unknown", m.Name)
		}
	}
	var b strings.Builder
	b.WriteString(gendocs.Header)
	b.WriteString(`# Metrics

Every metric the agent exports on ` + "`--metrics-addr`" + ` (` + "`/metrics`" + `), read from the registry of an
agent built in-process with every optional feature that adds series on (` + "`--dnstap`" + `; a test fails when a metric
declared in the code is missing here): its own ` + "`nodecache_*`" + ` series and the ` + "`coredns_*`" + ` series that CoreDNS and
NodeLocal DNSCache dashboards and alerts query ([observability.md](observability.md)). No label carries a
query name or a client IP: label values come from small fixed sets (an upstream ` + "`server`" + ` is one of the
configured ` + "`IP:port`" + `s). The Go runtime (` + "`go_*`" + `) and process (` + "`process_*`" + `) collectors are exported too.

` + "`deploy/grafana-dashboard.json`" + ` and ` + "`deploy/monitoring`" + ` chart and alert on them; a unit test checks that every series they select is one the agent exports.

`)
	b.WriteString(gendocs.MetricTable(ms))
	gendocs.Golden(t, "../../docs/metrics.md", []byte(b.String()), *updateDocs)
}
