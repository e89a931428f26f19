package corefile

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Limits of import, as CoreDNS has them (it caps expansions; nesting is
// ours): a file may import files that import files, at most
// MaxImportDepth deep, and a Corefile may expand at most MaxImports
// imports and snippets in all, so that a file importing itself ends.
const (
	MaxImportDepth = 10
	MaxImports     = 1000
)

// Source is one file an import names: its name, for messages, and text.
type Source struct {
	Name, Text string
}

// Importer returns the files that an import pattern names, sorted, for
// the file that holds the import. A pattern holds at most one * or ?, as
// in CoreDNS. No match is not an error (CoreDNS warns and goes on).
type Importer func(pattern, from string) ([]Source, error)

// Import is one `import` read, and what it matched.
type Import struct {
	File    string // the file holding the import
	Line    int
	Pattern string
	Files   []string // the files read, or the snippet's name; empty: nothing matched
}

// DirImporter reads imports from the file system, as CoreDNS does: a
// relative pattern is relative to the importing file's directory.
func DirImporter() Importer { return DirImporterIn("") }

// DirImporterIn is DirImporter for a Corefile named relative to dir: a
// relative file name is taken as under dir.
func DirImporterIn(dir string) Importer {
	return func(pattern, from string) ([]Source, error) {
		if !filepath.IsAbs(from) && !strings.HasPrefix(from, dir) {
			from = filepath.Join(dir, from)
		}
		if !filepath.IsAbs(pattern) {
			pattern = filepath.Join(filepath.Dir(from), pattern)
		}
		if err := checkPattern(pattern); err != nil {
			return nil, err
		}
		names, err := filepath.Glob(pattern)
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", pattern, err)
		}
		if len(names) == 0 && !strings.ContainsAny(pattern, "*?") {
			return nil, fmt.Errorf("import %s: no such file", pattern)
		}
		return readAll(names)
	}
}

// FlatImporter reads imports from one directory (or the keys of a
// ConfigMap written there): whatever directory a pattern names, its last
// element is matched against the file names in dir. This is how the
// coredns-custom ConfigMap of AKS and k3s is mounted: every key in
// /etc/coredns/custom. The files are named label/NAME in messages.
func FlatImporter(dir, label string) Importer {
	return func(pattern, _ string) ([]Source, error) {
		if err := checkPattern(pattern); err != nil {
			return nil, err
		}
		names, err := filepath.Glob(filepath.Join(dir, filepath.Base(pattern)))
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", pattern, err)
		}
		srcs, err := readAll(names)
		for i := range srcs {
			srcs[i].Name = path.Join(label, filepath.Base(srcs[i].Name))
		}
		return srcs, err
	}
}

func checkPattern(p string) error {
	if strings.Count(p, "*")+strings.Count(p, "?") > 1 || strings.ContainsAny(p, "[]") {
		return fmt.Errorf("import %s: a pattern may hold one wildcard (* or ?), as in CoreDNS", p)
	}
	return nil
}

func readAll(names []string) ([]Source, error) {
	sort.Strings(names)
	out := make([]Source, 0, len(names))
	for _, n := range names {
		if fi, err := os.Stat(n); err == nil && fi.IsDir() {
			continue
		}
		data, err := os.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("reading import: %w", err)
		}
		out = append(out, Source{Name: n, Text: string(data)})
	}
	return out, nil
}

// expander splices imports and snippets into a token stream.
type expander struct {
	opts     Options
	snippets map[string][]token
	srcs     int // texts lexed and snippets pasted so far: the next src id
	imports  []Import
}

// lexFile fills and lexes one text and expands its imports.
func (e *expander) lexFile(name, text string, depth int) ([]token, error) {
	text, err := fillText(name, text, e.opts.Vars)
	if err != nil {
		return nil, err
	}
	e.srcs++
	toks, err := lex(name, text, e.srcs)
	if err != nil {
		return nil, err
	}
	for i := range toks {
		if toks[i].text, err = expandEnv(toks[i].text, e.opts.Vars); err != nil {
			return nil, &SyntaxError{File: name, Line: toks[i].line, Msg: err.Error()}
		}
	}
	toks, err = e.takeSnippets(toks)
	if err != nil {
		return nil, err
	}
	return e.expand(toks, depth)
}

// takeSnippets removes the top-level blocks named "(NAME)" from toks and
// keeps their bodies for `import NAME`.
func (e *expander) takeSnippets(toks []token) ([]token, error) {
	var out []token
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		name, isSnippet := strings.CutPrefix(t.text, "(")
		isSnippet = isSnippet && strings.HasSuffix(name, ")") && !t.quoted && (i == 0 || !sameLine(toks[i-1], t)) &&
			i+1 < len(toks) && isOpen(toks[i+1])
		if !isSnippet {
			out = append(out, t)
			continue
		}
		end, err := closing(toks, i+1)
		if err != nil {
			return nil, err
		}
		e.snippets[strings.TrimSuffix(name, ")")] = toks[i+2 : end]
		i = end
	}
	return out, nil
}

// closing returns the index of the brace that closes the one at open.
func closing(toks []token, open int) (int, error) {
	depth := 0
	for i := open; i < len(toks); i++ {
		switch {
		case isOpen(toks[i]):
			depth++
		case isClose(toks[i]):
			depth--
			if depth == 0 {
				return i, nil
			}
		}
	}
	t := toks[open]
	return 0, &SyntaxError{File: t.file, Line: t.line, Msg: "block opened here is never closed"}
}

// expand replaces each `import PATTERN` that starts a line with the
// snippet or the files it names.
func (e *expander) expand(toks []token, depth int) ([]token, error) {
	var out []token
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.quoted || t.text != "import" || (i > 0 && sameLine(toks[i-1], t)) {
			out = append(out, t)
			continue
		}
		j := i + 1
		for j < len(toks) && sameLine(toks[j], t) && !isOpen(toks[j]) && !isClose(toks[j]) {
			j++
		}
		if j != i+2 {
			return nil, &SyntaxError{File: t.file, Line: t.line, Msg: "import takes one file, glob pattern or snippet name"}
		}
		got, err := e.importOne(t, toks[i+1].text, depth)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
		i = j - 1
	}
	return out, nil
}

func (e *expander) importOne(at token, pattern string, depth int) ([]token, error) {
	errAt := func(msg string) error { return &SyntaxError{File: at.file, Line: at.line, Msg: msg} }
	if depth >= MaxImportDepth {
		return nil, errAt(fmt.Sprintf("imports nested more than %d deep (does a file import itself?)", MaxImportDepth))
	}
	if len(e.imports) >= MaxImports {
		return nil, errAt(fmt.Sprintf("more than %d imports in all (does a file import itself?)", MaxImports))
	}
	rec := Import{File: at.file, Line: at.line, Pattern: pattern}
	if body, ok := e.snippets[pattern]; ok {
		rec.Files = []string{"(" + pattern + ")"}
		e.imports = append(e.imports, rec)
		e.srcs++
		pasted := make([]token, len(body))
		for k, b := range body {
			b.src = e.srcs // one pass per paste: lines of two pastes never merge
			pasted[k] = b
		}
		return e.expand(pasted, depth+1)
	}
	srcs, err := e.opts.Import(pattern, at.file)
	if err != nil {
		return nil, errAt(err.Error())
	}
	e.imports = append(e.imports, rec)
	idx := len(e.imports) - 1
	var out []token
	for _, s := range srcs {
		e.imports[idx].Files = append(e.imports[idx].Files, s.Name)
		toks, err := e.lexFile(s.Name, s.Text, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, toks...)
	}
	return out, nil
}
