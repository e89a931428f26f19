package main

import (
	"go/parser"
	"go/token"
	"io/fs"
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
