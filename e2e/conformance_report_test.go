//go:build e2e

package e2e

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// What e2e.test's JUnit report says about the DNS specs, and the checks
// TestConformance makes of it.

// conformanceDNSSpecs is how many [Conformance] specs v1.35.4 has under
// [sig-network] DNS; all must run and pass.
const conformanceDNSSpecs = 8

type junitReport struct {
	Suites []struct {
		Cases []junitCase `xml:"testcase"`
	} `xml:"testsuite"`
}

type junitCase struct {
	Name    string  `xml:"name,attr"`
	Status  string  `xml:"status,attr"`
	Time    float64 `xml:"time,attr"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
	Failure *struct {
		Text string `xml:",chardata"`
	} `xml:"failure"`
	Error *struct {
		Text string `xml:",chardata"`
	} `xml:"error"`
}

// specResult is one spec of the focus: its name without the leaf node type.
type specResult struct {
	Name    string
	Status  string // passed, skipped, failed
	Seconds float64
	Why     string // the skip message or the failure's first line
}

type conformanceResult struct {
	Specs  []specResult // those matching the focus, sorted by name
	Broken []string     // suite nodes (BeforeSuite, ReportAfterSuite...) that failed
}

var focusRE = regexp.MustCompile(conformanceFocus)

// readJUnit parses e2e.test's JUnit file.
func readJUnit(path string) (conformanceResult, error) {
	b, err := os.ReadFile(path) //nolint:gosec // the suite's own report
	if err != nil {
		return conformanceResult{}, err
	}
	return parseJUnit(b)
}

func parseJUnit(b []byte) (conformanceResult, error) {
	var r junitReport
	if err := xml.Unmarshal(b, &r); err != nil {
		return conformanceResult{}, fmt.Errorf("parsing the JUnit report: %w", err)
	}
	var res conformanceResult
	for _, s := range r.Suites {
		for _, c := range s.Cases {
			failed := c.Failure != nil || c.Error != nil || c.Status == "failed" || c.Status == "panicked" || c.Status == "timedout" || c.Status == "interrupted" || c.Status == "aborted"
			name, isSpec := strings.CutPrefix(c.Name, "[It] ")
			if !isSpec {
				if failed {
					res.Broken = append(res.Broken, c.Name+": "+firstLine(failureText(c)))
				}
				continue
			}
			if !focusRE.MatchString(name) {
				continue
			}
			sr := specResult{Name: name, Seconds: c.Time}
			switch {
			case failed:
				sr.Status, sr.Why = "failed", firstLine(failureText(c))
			case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
				sr.Status = "skipped"
				if c.Skipped != nil {
					sr.Why = c.Skipped.Message
				}
			default:
				sr.Status = "passed"
			}
			res.Specs = append(res.Specs, sr)
		}
	}
	sort.Slice(res.Specs, func(i, j int) bool { return res.Specs[i].Name < res.Specs[j].Name })
	return res, nil
}

func failureText(c junitCase) string {
	if c.Failure != nil {
		return c.Failure.Text
	}
	if c.Error != nil {
		return c.Error.Text
	}
	return c.Status
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func (r conformanceResult) count(status string, conformanceOnly bool) int {
	n := 0
	for _, s := range r.Specs {
		if s.Status == status && (!conformanceOnly || strings.Contains(s.Name, "[Conformance]")) {
			n++
		}
	}
	return n
}

// problems lists what makes the run a failure: a failed spec or suite
// node, a [Conformance] spec not passed, a skip the docs do not list, a
// listed skip that ran, no spec passed.
func (r conformanceResult) problems(documented map[string]bool) []string {
	var out []string
	out = append(out, r.Broken...)
	seen := map[string]bool{}
	for _, s := range r.Specs {
		seen[s.Name] = true
		switch s.Status {
		case "failed":
			out = append(out, fmt.Sprintf("FAILED %q: %s", s.Name, s.Why))
		case "skipped":
			if strings.Contains(s.Name, "[Conformance]") {
				out = append(out, fmt.Sprintf("[Conformance] spec skipped: %q (%s)", s.Name, s.Why))
			} else if !documented[s.Name] {
				out = append(out, fmt.Sprintf("skipped but not listed in docs/conformance.md: %q (%s)", s.Name, s.Why))
			}
		case "passed":
			if documented[s.Name] {
				out = append(out, fmt.Sprintf("listed as skipped in docs/conformance.md but it ran and passed: %q", s.Name))
			}
		}
	}
	for name := range documented {
		if !seen[name] {
			out = append(out, fmt.Sprintf("docs/conformance.md lists %q as skipped, e2e.test has no such DNS spec", name))
		}
	}
	if got := r.count("passed", true); got != conformanceDNSSpecs {
		out = append(out, fmt.Sprintf("%d [sig-network] DNS [Conformance] specs passed, want %d", got, conformanceDNSSpecs))
	}
	if r.count("passed", false) == 0 {
		out = append(out, "no DNS spec passed")
	}
	sort.Strings(out)
	return out
}

// summary is one line of counts, then a line per spec.
func (r conformanceResult) summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d [sig-network] DNS specs: %d passed (%d [Conformance]), %d skipped, %d failed",
		len(r.Specs), r.count("passed", false), r.count("passed", true), r.count("skipped", false), r.count("failed", false))
	for _, s := range r.Specs {
		fmt.Fprintf(&b, "\n  %-7s %6.1fs  %s", s.Status, s.Seconds, s.Name)
		if s.Status != "passed" && s.Why != "" {
			fmt.Fprintf(&b, " (%s)", s.Why)
		}
	}
	return b.String()
}

// documentedSkips reads the specs docs/conformance.md lists as skipped:
// the first code span of each table row in its "## Skipped" section.
func documentedSkips(path string) (map[string]bool, error) {
	f, err := os.Open(path) //nolint:gosec // the repository's own doc
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = strings.HasPrefix(line, "## Skipped")
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		rest := strings.TrimPrefix(line, "| `")
		if name, _, ok := strings.Cut(rest, "`"); ok {
			out[name] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no skipped spec listed under a \"## Skipped\" heading", path)
	}
	return out, nil
}

// TestConformanceReport checks the JUnit reading and the verdict on a
// report shaped like e2e.test's.
func TestConformanceReport(t *testing.T) {
	var cases strings.Builder
	for i := range conformanceDNSSpecs {
		fmt.Fprintf(&cases, `<testcase name="[It] [sig-network] DNS conf %d [Conformance]" status="passed" time="3.5"></testcase>`, i)
	}
	report := `<testsuites><testsuite name="Kubernetes e2e suite">` + cases.String() +
		`<testcase name="[SynchronizedBeforeSuite]" status="passed"></testcase>
<testcase name="[It] [sig-network] DNS should provide DNS for the cluster [Provider:GCE]" status="skipped"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-network] DNS other" status="failed"><failure type="failed">dig said nothing
more</failure></testcase>
<testcase name="[It] [sig-apps] Deployment x" status="skipped"><skipped message="skipped"></skipped></testcase>
</testsuite></testsuites>`
	r, err := parseJUnit([]byte(report))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(r.Specs), conformanceDNSSpecs+2; got != want {
		t.Fatalf("specs: got %d, want %d (the sig-apps one is outside the focus)", got, want)
	}
	got := r.problems(map[string]bool{"[sig-network] DNS should provide DNS for the cluster [Provider:GCE]": true, "[sig-network] DNS gone": true})
	want := []string{
		`FAILED "[sig-network] DNS other": dig said nothing`,
		`docs/conformance.md lists "[sig-network] DNS gone" as skipped, e2e.test has no such DNS spec`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\ngot  %q\nwant %q", got, want)
	}
	if p := strings.Join(r.problems(nil), "\n"); !strings.Contains(p, "skipped but not listed in docs/conformance.md") {
		t.Errorf("with no documented skip: got %q, want the GCE skip reported", p)
	}
}
