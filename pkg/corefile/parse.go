package corefile

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Corefile is a parsed Corefile.
type Corefile struct {
	File   string   // the name given to Parse, for messages
	Blocks []*Block // in file order
}

// Block is one server block: the zones it serves and its directives.
type Block struct {
	Keys       []string // "cluster.local:53", ".:53", "dns://.", as written
	Line       int
	Directives []*Directive
}

// Directive is one line of a block (a plugin and its arguments), or of a
// directive's own block (an option).
type Directive struct {
	Name    string
	Args    []string
	Line    int
	Options []*Directive // the lines of its { } block; nil without one
}

// String is the directive as one line: name and arguments.
func (d *Directive) String() string {
	return strings.Join(append([]string{d.Name}, d.Args...), " ")
}

// Option returns the first option named name, or nil.
func (d *Directive) Option(name string) *Directive {
	for _, o := range d.Options {
		if o.Name == name {
			return o
		}
	}
	return nil
}

// Vars are the values of placeholders: {$NAME} and {%NAME%} look up NAME,
// __PILLAR__NAME__ looks up the whole word.
type Vars map[string]string

// pillarRE matches a node-local-dns manifest variable.
var pillarRE = regexp.MustCompile(`__PILLAR__[A-Z0-9_]*[A-Z0-9]__`)

// envRE matches {$NAME} and {%NAME%}.
var envRE = regexp.MustCompile(`\{\$([A-Za-z0-9_]+)\}|\{%([A-Za-z0-9_]+)%\}`)

// Pillars returns the __PILLAR__ variables left in s.
func Pillars(s string) []string { return pillarRE.FindAllString(s, -1) }

// ParseFile reads and parses the Corefile at path.
func ParseFile(path string, vars Vars) (*Corefile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading Corefile: %w", err)
	}
	return Parse(path, string(data), vars)
}

// Parse parses the Corefile text src; file names it in errors.
func Parse(file, src string, vars Vars) (*Corefile, error) {
	// node-local-dns fills its variables with sed, before CoreDNS reads
	// the text: a value may hold several words.
	src = pillarRE.ReplaceAllStringFunc(src, func(p string) string {
		if v, ok := vars[p]; ok {
			return v
		}
		return p
	})
	toks, err := lex(file, src)
	if err != nil {
		return nil, err
	}
	for i := range toks {
		if toks[i].text, err = expandEnv(toks[i].text, vars); err != nil {
			return nil, &SyntaxError{File: file, Line: toks[i].line, Msg: err.Error()}
		}
	}
	p := &parser{file: file, toks: toks}
	cf := &Corefile{File: file}
	for !p.done() {
		b, err := p.block(len(cf.Blocks) == 0)
		if err != nil {
			return nil, err
		}
		cf.Blocks = append(cf.Blocks, b)
	}
	if len(cf.Blocks) == 0 {
		return nil, &SyntaxError{File: file, Line: 1, Msg: "no server blocks"}
	}
	return cf, nil
}

func expandEnv(s string, vars Vars) (string, error) {
	var missing string
	out := envRE.ReplaceAllStringFunc(s, func(m string) string {
		name := strings.Trim(m, "{}$%")
		v, ok := vars[name]
		if !ok && missing == "" {
			missing = name
		}
		return v
	})
	if missing != "" {
		return "", fmt.Errorf("environment variable %s has no value (give it with --var %s=VALUE)", missing, missing)
	}
	return out, nil
}

type parser struct {
	file string
	toks []token
	i    int
}

func (p *parser) done() bool { return p.i >= len(p.toks) }

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	p.i++
	return t
}

func (p *parser) errorf(line int, format string, args ...any) error {
	return &SyntaxError{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

func isOpen(t token) bool  { return !t.quoted && t.text == "{" }
func isClose(t token) bool { return !t.quoted && t.text == "}" }

// block parses the keys of a server block and its directives. Only the
// first block may go without braces, and then it is the only one.
func (p *parser) block(first bool) (*Block, error) {
	start := p.peek()
	if isOpen(start) || isClose(start) {
		return nil, p.errorf(start.line, "unexpected %q where a server block's zones should be", start.text)
	}
	b := &Block{Line: start.line}
	for !p.done() {
		t := p.peek()
		if isOpen(t) || (t.line != start.line && !strings.HasSuffix(b.lastKey(), ",")) {
			break
		}
		p.next()
		for _, k := range strings.Split(t.text, ",") {
			if k = strings.TrimSpace(k); k != "" {
				b.Keys = append(b.Keys, k)
			}
		}
	}
	if p.done() || !isOpen(p.peek()) {
		if !first {
			return nil, p.errorf(start.line, "server block %s has no { }", strings.Join(b.Keys, " "))
		}
		ds, err := p.directives(false, start.line)
		b.Directives = ds
		return b, err
	}
	p.next() // {
	ds, err := p.directives(true, start.line)
	b.Directives = ds
	return b, err
}

func (b *Block) lastKey() string {
	if len(b.Keys) == 0 {
		return ","
	}
	return b.Keys[len(b.Keys)-1]
}

// directives parses lines up to a closing brace (closed) or the end of
// the file.
func (p *parser) directives(closed bool, open int) ([]*Directive, error) {
	var out []*Directive
	for !p.done() {
		t := p.next()
		switch {
		case isClose(t):
			if !closed {
				return nil, p.errorf(t.line, "unexpected }")
			}
			return out, nil
		case isOpen(t):
			return nil, p.errorf(t.line, "unexpected { (a block must follow a directive on its line)")
		}
		d := &Directive{Name: t.text, Line: t.line}
		for !p.done() && p.peek().line == t.line && !isClose(p.peek()) {
			a := p.next()
			if isOpen(a) {
				opts, err := p.directives(true, a.line)
				if err != nil {
					return nil, err
				}
				d.Options = opts
				if d.Options == nil {
					d.Options = []*Directive{}
				}
				break
			}
			d.Args = append(d.Args, a.text)
		}
		out = append(out, d)
	}
	if closed {
		return nil, p.errorf(open, "block opened here is never closed")
	}
	return out, nil
}
