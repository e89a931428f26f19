package main

import (
	"bytes"
	"errors"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
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
