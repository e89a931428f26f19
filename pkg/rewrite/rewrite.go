package rewrite

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"
)

// Rule is one name rewrite.
type Rule struct {
	Suffix     bool   // a suffix match; else exact
	From, To   string // lowercased; FQDNs for exact rules
	AnswerAuto bool   // suffix rules: write record names back too
}

// Parse parses "[exact|suffix] FROM TO [answer auto]".
func Parse(spec string) (Rule, error) {
	f := strings.Fields(strings.ToLower(spec))
	var r Rule
	if len(f) > 0 && (f[0] == "exact" || f[0] == "suffix") {
		r.Suffix = f[0] == "suffix"
		f = f[1:]
	}
	if len(f) == 4 && f[2] == "answer" && f[3] == "auto" {
		r.AnswerAuto = true
		f = f[:2]
	}
	if len(f) != 2 {
		return Rule{}, fmt.Errorf("rewrite %q: want [exact|suffix] FROM TO [answer auto]", spec)
	}
	r.From, r.To = f[0], f[1]
	if !r.Suffix {
		r.From, r.To = dns.Fqdn(r.From), dns.Fqdn(r.To)
	}
	for _, n := range []string{r.From, r.To} {
		if _, ok := dns.IsDomainName(strings.Trim(n, ".")); !ok || strings.Trim(n, ".") == "" {
			return Rule{}, fmt.Errorf("rewrite %q: %q is not a name", spec, n)
		}
	}
	return r, nil
}

// Rules are rewrite rules in order.
type Rules []Rule

// Apply returns the name to ask for name (a lowercased FQDN) and the rule
// that matched, or ok false.
func (rs Rules) Apply(name string) (to string, r Rule, ok bool) {
	for _, r := range rs {
		switch {
		case !r.Suffix && name == r.From:
			return r.To, r, true
		case r.Suffix && strings.HasSuffix(name, r.From):
			return strings.TrimSuffix(name, r.From) + r.To, r, true
		}
	}
	return "", Rule{}, false
}

// Revert writes the original name back into m, the reply for asked: its
// question always, its records as the rule says. m is modified.
func (r Rule) Revert(m *dns.Msg, original, asked string) {
	if len(m.Question) == 1 {
		m.Question[0].Name = original
	}
	if r.Suffix && !r.AnswerAuto {
		return
	}
	back := func(name string) string {
		l := strings.ToLower(name)
		switch {
		case !r.Suffix && l == asked:
			return original
		case r.Suffix && strings.HasSuffix(l, r.To):
			return strings.TrimSuffix(l, r.To) + r.From
		}
		return name
	}
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			if rr.Header().Rrtype == dns.TypeOPT {
				continue
			}
			rr.Header().Name = back(rr.Header().Name)
			if c, ok := rr.(*dns.CNAME); ok {
				c.Target = back(c.Target)
			}
		}
	}
}
