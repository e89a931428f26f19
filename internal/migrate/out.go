package migrate

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"unicode"

	"sigs.k8s.io/yaml"

	"github.com/nodecache/nodecache/pkg/corefile"
)

// A Migration is what `nodecache migrate` made of a Corefile: settings of
// the --config file, each with the directive it reproduces, notes on what
// behaves the same without a setting, and what cannot be reproduced.
type Migration struct {
	source      string              // "Corefile" or "node-local-dns ConfigMap", for the header
	settings    map[string]*setting // by flag name
	notes       []string            // comment lines: same behaviour, no setting needed
	unsupported []string            // one line each: what changes for pods
}

// Unsupported lists, one line each, what the config cannot reproduce and
// how pods will see the difference.
// The same loss on several lines (one plugin in every block) is one line.
func (m *Migration) Unsupported() []string { return groupNotes(m.unsupported) }

// setting is one key of the config file. A list key has items; a scalar
// one has a value. from names the directive it came from.
type setting struct {
	value string
	from  string
	items []item
}

type item struct{ value, from string }

func newMigration(source string) *Migration {
	return &Migration{source: source, settings: map[string]*setting{}}
}

// where names a directive for comments and messages: "Corefile:12 cache 30",
// with the file it is written in (the Corefile or an import).
func where(file string, d *corefile.Directive) string {
	if d.File != "" {
		file = d.File
	}
	return fmt.Sprintf("%s:%d %s", file, d.Line, d.String())
}

// blockWhere names a server block: "Corefile:1 .:53".
func blockWhere(b *corefile.Block) string {
	return fmt.Sprintf("%s:%d %s", b.File, b.Line, strings.Join(b.Keys, " "))
}

// set records a scalar setting. A second directive asking for the same
// value adds itself to the comment; one asking for another value is
// reported, and the first one stays.
func (m *Migration) set(key, value, from string) {
	if s, ok := m.settings[key]; ok {
		if s.value != value {
			m.unsupport(from, fmt.Sprintf("asks for %s %s, but %s already set it to %s; nodecache has one %s for every zone",
				key, value, strings.SplitN(s.from, ";", 2)[0], s.value, key))
			return
		}
		if !strings.Contains(s.from, from) {
			s.from += "; " + from
		}
		return
	}
	m.settings[key] = &setting{value: value, from: from}
}

// add appends an item to a list setting.
func (m *Migration) add(key, value, from string) {
	s, ok := m.settings[key]
	if !ok {
		s = &setting{}
		m.settings[key] = s
	}
	s.items = append(s.items, item{value, from})
}

func (m *Migration) note(from, msg string) { m.notes = append(m.notes, from+": "+msg) }

func (m *Migration) unsupport(from, msg string) {
	m.unsupported = append(m.unsupported, from+": "+msg)
}

// WriteYAML writes the config file: every line a setting or a comment,
// every setting with the directive it came from.
func (m *Migration) WriteYAML(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# nodecache config written by `nodecache migrate` from %s.\n", m.source)
	b.WriteString("# Use it with `nodecache run --config FILE`; each setting names the directive it reproduces.\n")
	keys := make([]string, 0, len(m.settings))
	for k := range m.settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s := m.settings[k]
		if s.items == nil {
			fmt.Fprintf(&b, "%s: %s  # %s\n", k, yamlScalar(s.value), comment(s.from))
			continue
		}
		fmt.Fprintf(&b, "%s:  # one entry per line below\n", k)
		for _, it := range s.items {
			fmt.Fprintf(&b, "  - %s  # %s\n", yamlScalar(it.value), comment(it.from))
		}
	}
	if len(m.notes) > 0 {
		b.WriteString("# Reproduced without a setting, or changed in a way pods do not see:\n")
		for _, n := range groupNotes(m.notes) {
			b.WriteString("#   " + comment(n) + "\n")
		}
	}
	if len(m.unsupported) > 0 {
		b.WriteString("# NOT reproduced (also listed on stderr):\n")
		for _, u := range m.Unsupported() {
			b.WriteString("#   " + comment(u) + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// comment is s as the text of a comment: control characters (a line
// break would end the comment and start a key) are written as ?.
// Translate refuses them in the Corefile already; this holds whatever
// reaches a comment.
func comment(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || r == '\u0085' {
			return '?'
		}
		return r
	}, s)
}

// yamlScalar quotes v unless YAML reads it back, plain, as the same
// string (not a number, a bool, a map key or a comment).
func yamlScalar(v string) string {
	if v == "true" || v == "false" {
		return v // a flag's boolean; the config reader prints it back the same
	}
	plain := v != "" && !strings.ContainsAny(v, ":#{}[]&*!|>'\"%@`,") && !strings.HasPrefix(v, "-") &&
		!strings.HasPrefix(v, " ") && !strings.HasSuffix(v, " ")
	if plain {
		var back map[string]any
		if err := yaml.Unmarshal([]byte("k: "+v), &back); err == nil && back["k"] == v {
			return v
		}
	}
	return "'" + strings.ReplaceAll(v, "'", "''") + "'"
}

// Values are the settings written, by key: a scalar's value, or a list's
// items. The config must say exactly this (FuzzMigrate checks it).
func (m *Migration) Values() map[string][]string {
	out := make(map[string][]string, len(m.settings))
	for k, s := range m.settings {
		if s.items == nil {
			out[k] = []string{s.value}
			continue
		}
		for _, it := range s.items {
			out[k] = append(out[k], it.value)
		}
	}
	return out
}

// lineRE finds the line number of a "file:N directive" prefix.
var lineRE = regexp.MustCompile(`^[^ ]*:(\d+) `)

// groupNotes folds notes that say the same about the same directive on
// other lines into the first: "Corefile:2 errors (also lines 17, 28): ...".
func groupNotes(notes []string) []string {
	type group struct {
		first string
		also  []string
	}
	var order []string
	groups := map[string]*group{}
	for _, n := range notes {
		from, msg, _ := strings.Cut(n, ": ")
		key := n // a note without a line stays alone
		if m := lineRE.FindStringSubmatch(from); m != nil {
			key = strings.TrimPrefix(from, m[0][:len(m[0])-1]) + "\x00" + msg // directive text and message
		}
		if g, ok := groups[key]; ok {
			if m := lineRE.FindStringSubmatch(from); m != nil {
				g.also = append(g.also, m[1])
			}
			continue
		}
		groups[key] = &group{first: n}
		order = append(order, key)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		g := groups[k]
		if len(g.also) == 0 {
			out = append(out, g.first)
			continue
		}
		from, msg, _ := strings.Cut(g.first, ": ")
		out = append(out, fmt.Sprintf("%s (also lines %s): %s", from, strings.Join(g.also, ", "), msg))
	}
	return out
}
