package gendocs

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestParseDesc(t *testing.T) {
	for _, tc := range []struct {
		desc *prometheus.Desc
		want Metric
	}{
		{prometheus.NewDesc("a_total", `help with "quotes", {braces} and a \ backslash`, []string{"x", "y"}, nil),
			Metric{Name: "a_total", Help: `help with "quotes", {braces} and a \ backslash`, Labels: []string{"x", "y"}}},
		{prometheus.NewDesc("b", "h", nil, prometheus.Labels{"version": `v1 "}" {`}),
			Metric{Name: "b", Help: "h", Const: []string{`version="v1 \"}\" {"`}}},
		{prometheus.NewDesc("c", "", nil, nil), Metric{Name: "c"}},
	} {
		got, err := parseDesc(tc.desc.String())
		if err != nil {
			t.Fatalf("%s: %v", tc.desc, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseDesc(%s): got %+v, want %+v", tc.desc, got, tc.want)
		}
	}
	if _, err := parseDesc("something else"); err == nil {
		t.Error("parseDesc of garbage: got no error, want one")
	}
}

func TestDescribeListsVectorsWithoutChildren(t *testing.T) {
	reg := prometheus.NewRegistry()
	unused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_unused_total", Help: "never touched"}, []string{"kind"})
	used := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "x_seconds", Help: "observed"}, []string{"from"})
	unknown := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "x_unknown", Help: "type not known"}, []string{"k"})
	used.WithLabelValues("event").Observe(1)
	other := prometheus.NewGauge(prometheus.GaugeOpts{Name: "y_gauge", Help: "other prefix"})
	reg.MustRegister(unused, used, unknown, other)

	got, err := Describe(reg, "y_")
	if err != nil {
		t.Fatal(err)
	}
	want := []Metric{
		{Name: "x_seconds", Type: "histogram", Help: "observed", Labels: []string{"from"}},
		{Name: "x_unknown", Help: "type not known", Labels: []string{"k"}},
		{Name: "x_unused_total", Type: "counter", Help: "never touched", Labels: []string{"kind"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	table := MetricTable(got)
	if !strings.Contains(table, "| `x_unused_total` | counter | `kind` | never touched |") ||
		!strings.Contains(table, "| `x_unknown` | – | `k` | type not known |") {
		t.Errorf("table lacks the vector without children:\n%s", table)
	}
}

func TestFlagTable(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Duration("wait", 2*time.Second, "how long | at most")
	fs.String("name", "", "a name")
	got := FlagTable(fs)
	want := "| Flag | Default | Meaning |\n|---|---|---|\n" +
		"| `--name` | – | a name |\n" +
		"| `--wait` | `2s` | how long \\| at most |\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.md")
	Golden(t, path, []byte("one\n"), true)
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "one\n" {
		t.Fatalf("after update: got %q, %v; want %q", b, err, "one\n")
	}
	rec := &recorder{TB: t}
	Golden(rec, path, []byte("two\n"), false)
	if !rec.failed {
		t.Error("a drifted file did not fail the test")
	}
	rec = &recorder{TB: t}
	Golden(rec, path, []byte("one\n"), false)
	if rec.failed {
		t.Error("an unchanged file failed the test")
	}
}

// recorder is a testing.TB that notes failures instead of failing.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }
func (r *recorder) Fatal(...any)          { r.failed = true }

func TestSourceTypes(t *testing.T) {
	dir := t.TempDir()
	src := `package x

import "github.com/prometheus/client_golang/prometheus"

var (
	a = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "x_seconds", Help: "h"}, []string{"l"})
	b = prometheus.NewGauge(prometheus.GaugeOpts{Help: "h", Name: "x_bytes"})
	c = prometheus.NewCounter(prometheus.CounterOpts{Name: name})
)
`
	if err := os.WriteFile(filepath.Join(dir, "m.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := SourceTypes(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"x_seconds": "histogram", "x_bytes": "gauge"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	ms := []Metric{{Name: "x_seconds"}, {Name: "x_bytes", Type: "untyped"}, {Name: "other"}}
	FillTypes(ms, got)
	if ms[0].Type != "histogram" || ms[1].Type != "untyped" || ms[2].Type != "" {
		t.Errorf("FillTypes: got %+v, want the missing type filled and the others kept", ms)
	}
}

func TestSourceNames(t *testing.T) {
	dir := t.TempDir()
	src := `package x

import "github.com/prometheus/client_golang/prometheus"

var (
	a = prometheus.NewGauge(prometheus.GaugeOpts{Help: "h", Name: "x_bytes"})
	b = prometheus.NewDesc("x_entries", "h", nil, nil)
	c = prometheus.NewDesc("x_"+name, "h", nil, nil)
)
`
	if err := os.WriteFile(filepath.Join(dir, "m.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := SourceNames(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"x_bytes": true, "x_entries": true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
