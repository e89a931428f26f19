package agent

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A PromQL selector extractor for the compatibility test: it finds every
// series selector (metric name and label matchers) and every `by` label of
// an expression. It is no PromQL parser: it skips strings, ranges and
// offsets, tells functions and keywords from metric names by what follows
// them, and reports what it cannot read instead of guessing.
// (github.com/prometheus/prometheus/promql/parser would do it exactly, but
// pulls the prometheus module and raises the go directive and half the
// shared modules of go.mod; not worth it for a test.)

type matcher struct{ label, op, value string }

type selector struct {
	name     string
	matchers []matcher
}

type promRefs struct {
	selectors []selector
	grouping  []string // labels of by (...) clauses
}

var promKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true, "offset": true, "bool": true, "and": true, "or": true, "unless": true,
	"atan2": true, "inf": true, "nan": true}

// promAggregations may take their by or without clause before the
// parenthesis: `sum by (le) (x)`.
var promAggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true,
	"stddev": true, "stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true,
	"quantile": true, "limitk": true, "limit_ratio": true}

// extractRefs scans one PromQL expression.
func extractRefs(expr string) (promRefs, error) {
	var r promRefs
	s := &scanner{src: expr}
	for {
		s.skipSpace()
		if s.eof() {
			return r, nil
		}
		c := s.peek()
		switch {
		case c == '"' || c == '\'' || c == '`':
			if _, err := s.str(); err != nil {
				return r, err
			}
		case c == '[':
			if err := s.skipPast(']'); err != nil {
				return r, err
			}
		case c == '{':
			ms, err := s.matchers()
			if err != nil {
				return r, err
			}
			sel := selector{matchers: ms}
			for _, m := range ms {
				if m.label == "__name__" && m.op == "=" {
					sel.name = m.value
				}
			}
			if sel.name == "" {
				return r, fmt.Errorf("selector without a metric name at %d", s.pos)
			}
			r.selectors = append(r.selectors, sel)
		case isIdentStart(c):
			id := s.ident()
			s.skipSpace()
			switch {
			case id == "by" || id == "without":
				labels, err := s.labelList()
				if err != nil {
					return r, err
				}
				if id == "by" {
					r.grouping = append(r.grouping, labels...)
				}
			case id == "on" || id == "ignoring" || id == "group_left" || id == "group_right":
				if !s.eof() && s.peek() == '(' {
					if _, err := s.labelList(); err != nil {
						return r, err
					}
				}
			case id == "offset":
				s.skipSpace()
				if !s.eof() && s.peek() == '-' {
					s.pos++
				}
				s.token() // a duration or a Grafana variable
			case promKeywords[strings.ToLower(id)], promAggregations[id]:
			case !s.eof() && s.peek() == '(':
				// a function or an aggregation: its arguments are scanned next
			default:
				sel := selector{name: id}
				if !s.eof() && s.peek() == '{' {
					ms, err := s.matchers()
					if err != nil {
						return r, err
					}
					sel.matchers = ms
				}
				r.selectors = append(r.selectors, sel)
			}
		default:
			s.token() // numbers, operators, parentheses, commas, $variables
		}
	}
}

type scanner struct {
	src string
	pos int
}

func (s *scanner) eof() bool  { return s.pos >= len(s.src) }
func (s *scanner) peek() byte { return s.src[s.pos] }

func (s *scanner) skipSpace() {
	for !s.eof() {
		switch s.peek() {
		case ' ', '\t', '\n', '\r':
			s.pos++
		case '#': // a comment runs to the end of the line
			for !s.eof() && s.peek() != '\n' {
				s.pos++
			}
		default:
			return
		}
	}
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isIdentByte(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func (s *scanner) ident() string {
	start := s.pos
	for !s.eof() && isIdentByte(s.peek()) {
		s.pos++
	}
	return s.src[start:s.pos]
}

// token skips one token that is neither an identifier nor a string.
func (s *scanner) token() {
	c := s.peek()
	if c == '$' || c >= '0' && c <= '9' || c == '.' {
		s.pos++
		for !s.eof() && (isIdentByte(s.peek()) || s.peek() == '.') {
			s.pos++
		}
		return
	}
	s.pos++
}

func (s *scanner) skipPast(end byte) error {
	i := strings.IndexByte(s.src[s.pos:], end)
	if i < 0 {
		return fmt.Errorf("no %q after %d", end, s.pos)
	}
	s.pos += i + 1
	return nil
}

// str reads a quoted string and returns its value.
func (s *scanner) str() (string, error) {
	q := s.peek()
	s.pos++
	var b strings.Builder
	for !s.eof() {
		c := s.peek()
		s.pos++
		switch {
		case c == q:
			return b.String(), nil
		case c == '\\' && q != '`' && !s.eof():
			b.WriteByte(s.peek())
			s.pos++
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("unterminated string in %q", s.src)
}

// matchers reads {label op "value", ...}.
func (s *scanner) matchers() ([]matcher, error) {
	s.pos++ // {
	var ms []matcher
	for {
		s.skipSpace()
		if s.eof() {
			return nil, fmt.Errorf("unterminated selector in %q", s.src)
		}
		if s.peek() == '}' {
			s.pos++
			return ms, nil
		}
		if s.peek() == ',' {
			s.pos++
			continue
		}
		if !isIdentStart(s.peek()) {
			return nil, fmt.Errorf("want a label name at %d in %q", s.pos, s.src)
		}
		m := matcher{label: s.ident()}
		s.skipSpace()
		for _, op := range []string{"=~", "!~", "!=", "="} {
			if strings.HasPrefix(s.src[s.pos:], op) {
				m.op = op
				s.pos += len(op)
				break
			}
		}
		if m.op == "" {
			return nil, fmt.Errorf("want a matcher operator at %d in %q", s.pos, s.src)
		}
		s.skipSpace()
		if s.eof() || !strings.ContainsRune("\"'`", rune(s.peek())) {
			return nil, fmt.Errorf("want a quoted value at %d in %q", s.pos, s.src)
		}
		v, err := s.str()
		if err != nil {
			return nil, err
		}
		m.value = v
		ms = append(ms, m)
	}
}

// labelList reads (a, b, c).
func (s *scanner) labelList() ([]string, error) {
	s.skipSpace()
	if s.eof() || s.peek() != '(' {
		return nil, fmt.Errorf("want ( at %d in %q", s.pos, s.src)
	}
	s.pos++
	var labels []string
	for {
		s.skipSpace()
		if s.eof() {
			return nil, fmt.Errorf("unterminated label list in %q", s.src)
		}
		switch c := s.peek(); {
		case c == ')':
			s.pos++
			return labels, nil
		case c == ',':
			s.pos++
		case isIdentStart(c):
			labels = append(labels, s.ident())
		default:
			return nil, fmt.Errorf("unexpected %q in label list of %q", c, s.src)
		}
	}
}

func TestExtractRefs(t *testing.T) {
	tests := []struct {
		expr     string
		want     []string // name{label op value,...}
		grouping []string
	}{
		{`up`, []string{"up{}"}, nil},
		{`absent(up{job="x"} == 1)`, []string{`up{job="x"}`}, nil},
		{`histogram_quantile(0.99, sum(rate(a_bucket{job="n"}[5m])) by (server, zone, le)) > 4`,
			[]string{`a_bucket{job="n"}`}, []string{"server", "zone", "le"}},
		{`sum without (pod, rcode) (rate(b{job="n",rcode="SERVFAIL"}[5m])) / sum without (pod) (rate(b{job="n"}[5m])) > 0.03`,
			[]string{`b{job="n",rcode="SERVFAIL"}`, `b{job="n"}`}, nil},
		{`sum(c{pod=~"$pod"} - c{pod=~"$pod"} offset $__interval) by (to,rcode)`,
			[]string{`c{pod=~"$pod"}`, `c{pod=~"$pod"}`}, []string{"to", "rcode"}},
		{`sum by (le) (rate(d[$__rate_interval]))`, []string{"d{}"}, []string{"le"}},
		{`{__name__="e", a!~'x,}'}`, []string{`e{__name__="e",a!~"x,}"}`}, nil},
		{`f{a="q\"uote"} and on (a) group_left (b) g`, []string{`f{a="q"uote"}`, "g{}"}, nil},
	}
	for _, tt := range tests {
		r, err := extractRefs(tt.expr)
		if err != nil {
			t.Errorf("%s: %v", tt.expr, err)
			continue
		}
		var got []string
		for _, sel := range r.selectors {
			var ms []string
			for _, m := range sel.matchers {
				ms = append(ms, fmt.Sprintf("%s%s%q", m.label, m.op, m.value))
			}
			got = append(got, sel.name+"{"+strings.ReplaceAll(strings.Join(ms, ","), `\"`, `"`)+"}")
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: got selectors %q, want %q", tt.expr, got, tt.want)
		}
		if !slices.Equal(r.grouping, tt.grouping) {
			t.Errorf("%s: got by labels %q, want %q", tt.expr, r.grouping, tt.grouping)
		}
	}
	for _, bad := range []string{`a{b="c"`, `a{b}`, `{x="y"}`, `sum by a (b)`, `a{b="c}`} {
		if _, err := extractRefs(bad); err == nil {
			t.Errorf("%s: got no error, want one", bad)
		}
	}
}
