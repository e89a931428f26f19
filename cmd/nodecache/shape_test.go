package main

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestPkgImportsNoInternal holds the direction of imports: code under pkg/ is
// the bottom layer and never imports anything under internal/ (test files may,
// for helpers such as internal/testnet). make lint's depguard rule says the
// same; this test keeps it in `go test ./...`, which CI runs.
func TestPkgImportsNoInternal(t *testing.T) {
	const module = "github.com/nodecache/nodecache/"
	root := filepath.Join("..", "..", "pkg")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, module+"internal/") {
				t.Errorf("%s imports %s: pkg/ must not import internal/", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// maxFileLines is the house limit on a non-test Go file's length.
const maxFileLines = 400

// TestFileSizes holds every non-test Go file under cmd/, pkg/, internal/,
// e2e/, bench/ and tools/ to maxFileLines lines, so that a file stays one
// concept a reader takes in at once.
func TestFileSizes(t *testing.T) {
	// Files allowed over the limit until they are split; whoever splits one
	// removes its entry (a stale entry fails the test). Empty since
	// pkg/upstream/exchange.go and internal/migrate/translate.go were split.
	allowed := map[string]bool{}
	root := filepath.Join("..", "..")
	for _, dir := range []string{"cmd", "pkg", "internal", "e2e", "bench", "tools"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) && path == filepath.Join(root, dir) {
				return filepath.SkipDir
			}
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			n := bytes.Count(data, []byte("\n"))
			switch {
			case n > maxFileLines && !allowed[rel]:
				t.Errorf("%s has %d lines, over %d: split it by concept", rel, n, maxFileLines)
			case n <= maxFileLines && allowed[rel]:
				t.Errorf("%s has %d lines now: remove it from TestFileSizes' allow-list", rel, n)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogKeys holds the log keys of non-test code under cmd/, pkg/ and
// internal/ to snake_case, and the error key to logkey.Err: a key written as
// a string literal in a slog call (Debug, Info, Warn, Error, With) must be
// lowercase words joined by '_', and never "error".
func TestLogKeys(t *testing.T) {
	levels := map[string]int{"Debug": 1, "Info": 1, "Warn": 1, "Error": 1, "With": 0}
	key := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	fset := token.NewFileSet()
	for _, dir := range []string{"cmd", "pkg", "internal"} {
		err := filepath.WalkDir(filepath.Join("..", "..", dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || call.Ellipsis.IsValid() {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, isIdent := sel.X.(*ast.Ident); isIdent && x.Name == "http" { // http.Error is no log call
					return true
				}
				first, isLog := levels[sel.Sel.Name]
				if !isLog {
					return true
				}
				for i := first; i < len(call.Args); i += 2 {
					lit, ok := call.Args[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					k, _ := strconv.Unquote(lit.Value)
					if !key.MatchString(k) || k == "error" {
						t.Errorf("%s: log key %q: want snake_case, and logkey.Err for errors", fset.Position(lit.Pos()), k)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestPackageMapComplete holds docs/architecture.md's package map to the
// tree: every directory under cmd/, pkg/, internal/ and tools/ that holds Go
// files (testdata aside) has a row, and every row naming a path under them
// names a directory that exists.
func TestPackageMapComplete(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Package map\n")
	if !ok {
		t.Fatal("docs/architecture.md has no \"## Package map\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([^`]+)/` \\|")
	mapped := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		mapped[m[1]] = true
	}
	dirs := []string{"cmd", "pkg", "internal", "tools"}
	found := map[string]bool{}
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") {
				return nil
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			found[filepath.ToSlash(rel)] = true
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for p := range found {
		if !mapped[p] {
			t.Errorf("%s/ holds Go files but has no row in docs/architecture.md's package map", p)
		}
	}
	for p := range mapped {
		top, _, _ := strings.Cut(p, "/")
		if slices.Contains(dirs, top) && !found[p] {
			t.Errorf("docs/architecture.md's package map names %s/, which holds no Go package", p)
		}
	}
}
