package corefile

import (
	"fmt"
	"os"
	"strings"
)

// MaxNesting is how deep blocks may nest: a server block, a directive's
// block, an option's. CoreDNS's own Corefiles nest three deep; the limit
// keeps a crafted file from exhausting the stack.
const MaxNesting = 16

// Corefile is a parsed Corefile.
type Corefile struct {
	File    string   // the name given to Parse, for messages
	Blocks  []*Block // in file order, imports spliced in
	Imports []Import // every import read, in order
}

// Block is one server block: the zones it serves and its directives.
type Block struct {
	Keys       []string // "cluster.local:53", ".:53", "dns://.", as written
	File       string   // the file it is written in: the Corefile or an import
	Line       int
	Directives []*Directive
}

// Directive is one line of a block (a plugin and its arguments), or of a
// directive's own block (an option).
type Directive struct {
	Name    string
	Args    []string
	File    string // the file it is written in: the Corefile or an import
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

// Options are the inputs of a parse besides the text.
type Options struct {
	Vars Vars
	// Import reads the files an import names; nil reads them from the
	// file system relative to the importing file (DirImporter).
	Import Importer
}

// ParseFile reads and parses the Corefile at path.
func ParseFile(path string, vars Vars) (*Corefile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading Corefile: %w", err)
	}
	return Parse(path, string(data), vars)
}

// Parse parses the Corefile text src; file names it in errors. Imports
// are read from the file system, relative to file.
func Parse(file, src string, vars Vars) (*Corefile, error) {
	return ParseOptions(file, src, Options{Vars: vars})
}

// ParseOptions parses the Corefile text src with o's placeholders and
// importer.
func ParseOptions(file, src string, o Options) (*Corefile, error) {
	if o.Import == nil {
		o.Import = DirImporter()
	}
	e := &expander{opts: o, snippets: map[string][]token{}}
	toks, err := e.lexFile(file, src, 0)
	if err != nil {
		return nil, err
	}
	p := &parser{file: file, toks: toks}
	cf := &Corefile{File: file, Imports: e.imports}
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

func (p *parser) errorf(at token, format string, args ...any) error {
	return &SyntaxError{File: at.file, Line: at.line, Msg: fmt.Sprintf(format, args...)}
}

func isOpen(t token) bool  { return !t.quoted && t.text == "{" }
func isClose(t token) bool { return !t.quoted && t.text == "}" }

// block parses the keys of a server block and its directives. Only the
// first block may go without braces, and then it is the only one.
func (p *parser) block(first bool) (*Block, error) {
	start := p.peek()
	if isOpen(start) || isClose(start) {
		return nil, p.errorf(start, "unexpected %q where a server block's zones should be", start.text)
	}
	b := &Block{File: start.file, Line: start.line}
	for !p.done() {
		t := p.peek()
		if isOpen(t) || (!sameLine(t, start) && !strings.HasSuffix(b.lastKey(), ",")) {
			break
		}
		p.next()
		for _, k := range strings.Split(t.text, ",") {
			if k = strings.TrimSpace(k); k != "" {
				b.Keys = append(b.Keys, k)
			}
		}
	}
	if len(b.Keys) == 0 {
		return nil, p.errorf(start, "a server block without a zone")
	}
	if p.done() || !isOpen(p.peek()) {
		if !first {
			return nil, p.errorf(start, "server block %s has no { }", strings.Join(b.Keys, " "))
		}
		ds, err := p.directives(false, start, 1)
		b.Directives = ds
		return b, err
	}
	p.next() // {
	ds, err := p.directives(true, start, 1)
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
// the file; depth is how deep the block opened at open nests.
func (p *parser) directives(closed bool, open token, depth int) ([]*Directive, error) {
	if depth > MaxNesting {
		return nil, p.errorf(open, "blocks nested more than %d deep", MaxNesting)
	}
	var out []*Directive
	for !p.done() {
		t := p.next()
		switch {
		case isClose(t):
			if !closed {
				return nil, p.errorf(t, "unexpected }")
			}
			return out, nil
		case isOpen(t):
			return nil, p.errorf(t, "unexpected { (a block must follow a directive on its line)")
		}
		d := &Directive{Name: t.text, File: t.file, Line: t.line}
		for !p.done() && sameLine(p.peek(), t) && !isClose(p.peek()) {
			a := p.next()
			if isOpen(a) {
				opts, err := p.directives(true, a, depth+1)
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
