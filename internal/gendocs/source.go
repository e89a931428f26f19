package gendocs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// optsTypes maps the client library's option structs to metric types.
var optsTypes = map[string]string{
	"CounterOpts": "counter", "GaugeOpts": "gauge", "HistogramOpts": "histogram", "SummaryOpts": "summary",
}

// SourceTypes reads the Go files under dirs (tests and testdata skipped)
// and returns the type of every metric declared there with a literal name
// in a prometheus.CounterOpts, GaugeOpts, HistogramOpts or SummaryOpts. It
// types the vectors a fresh agent has no sample of yet, whose type the
// registry cannot tell.
func SourceTypes(dirs ...string) (map[string]string, error) {
	out := map[string]string{}
	err := inspectSource(dirs, func(n ast.Node) {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return
		}
		sel, ok := lit.Type.(*ast.SelectorExpr)
		if !ok || optsTypes[sel.Sel.Name] == "" {
			return
		}
		if name := literalName(lit); name != "" {
			out[name] = optsTypes[sel.Sel.Name]
		}
	})
	return out, err
}

// SourceNames returns every metric name declared under dirs as a literal:
// SourceTypes' names and the first argument of each prometheus.NewDesc
// call that is a string literal (a collector's series). A name built at run
// time ("nodecache_cache_"+name) is not among them.
func SourceNames(dirs ...string) (map[string]bool, error) {
	types, err := SourceTypes(dirs...)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for name := range types {
		out[name] = true
	}
	err = inspectSource(dirs, func(n ast.Node) {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "NewDesc" {
			return
		}
		if b, ok := call.Args[0].(*ast.BasicLit); ok && b.Kind == token.STRING {
			if s, err := strconv.Unquote(b.Value); err == nil {
				out[s] = true
			}
		}
	})
	return out, err
}

// inspectSource calls visit on every node of the Go files under dirs,
// tests and testdata skipped.
func inspectSource(dirs []string, visit func(ast.Node)) error {
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				visit(n)
				return true
			})
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// literalName is the Name field of an options literal when it is a string
// literal.
func literalName(lit *ast.CompositeLit) string {
	for _, e := range lit.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		if k, ok := kv.Key.(*ast.Ident); !ok || k.Name != "Name" {
			continue
		}
		if b, ok := kv.Value.(*ast.BasicLit); ok && b.Kind == token.STRING {
			if s, err := strconv.Unquote(b.Value); err == nil {
				return s
			}
		}
	}
	return ""
}

// FillTypes sets the type of each metric in ms that has none from types.
func FillTypes(ms []Metric, types map[string]string) {
	for i := range ms {
		if ms[i].Type == "" {
			ms[i].Type = types[ms[i].Name]
		}
	}
}
