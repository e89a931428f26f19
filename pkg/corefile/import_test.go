package corefile

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestImport reads imports as CoreDNS does: top-level (server blocks) and
// inside a block (directives), globs relative to the importing file,
// nested imports, snippets; each directive keeps the file and line it is
// written on.
func TestImport(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"custom/a.server":   "a.example {\n  forward . 10.0.0.1\n}\n",
		"custom/b.server":   "b.example {\n  import ../more/*.inc\n}\n",
		"custom/x.override": "log\n",
		"more/c.inc":        "cache 5\n",
	})
	main := filepath.Join(dir, "Corefile")
	src := "(common) {\n  errors\n  loop\n}\n.:53 {\n  import common\n  import common\n  import custom/*.override\n  forward . /etc/resolv.conf\n}\nimport custom/*.server\nimport custom/*.none\n"
	cf, err := Parse(main, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "[.:53]\n  errors\n  loop\n  errors\n  loop\n  log\n  forward . /etc/resolv.conf\n[a.example]\n  forward . 10.0.0.1\n[b.example]\n  cache 5\n"
	if got := flat(cf); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	d := cf.Blocks[2].Directives[0]
	if d.File != filepath.Join(dir, "more/c.inc") || d.Line != 1 {
		t.Errorf("imported directive: got %s:%d, want more/c.inc:1", d.File, d.Line)
	}
	if b := cf.Blocks[1]; b.File != filepath.Join(dir, "custom/a.server") || b.Line != 1 {
		t.Errorf("imported block: got %s:%d, want custom/a.server:1", b.File, b.Line)
	}
	var got []string
	for _, im := range cf.Imports {
		got = append(got, im.Pattern+"="+strings.Join(im.Files, ","))
	}
	wantImports := []string{"common=(common)", "common=(common)",
		"custom/*.override=" + filepath.Join(dir, "custom/x.override"),
		"custom/*.server=" + filepath.Join(dir, "custom/a.server") + "," + filepath.Join(dir, "custom/b.server"),
		"../more/*.inc=" + filepath.Join(dir, "more/c.inc"),
		"custom/*.none="}
	if !reflect.DeepEqual(got, wantImports) {
		t.Errorf("imports: got %q, want %q", got, wantImports)
	}
}

// TestFlatImporter matches every pattern's last element against one
// directory: the coredns-custom ConfigMap's keys.
func TestFlatImporter(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"test.server": "abc.com:53 {\n forward . 1.2.3.4\n}\n", "x.override": "log\n"})
	cf, err := ParseOptions("Corefile", ".:53 {\n import /etc/coredns/custom/*.override\n}\nimport custom/*.server\n", Options{Import: FlatImporter(dir, "custom")})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := flat(cf), "[.:53]\n  log\n[abc.com:53]\n  forward . 1.2.3.4\n"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestImportErrors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"self": "import self\n", "loop.server": ". {\n import loop.server\n}\n"})
	tests := []struct{ name, src, want string }{
		{"missing file", ". {\n import nothing-here\n}", "Corefile:2: import " + filepath.Join(dir, "nothing-here") + ": no such file"},
		{"two wildcards", "import */*.server\n", "Corefile:1: import " + filepath.Join(dir, "*/*.server") + ": a pattern may hold one wildcard (* or ?), as in CoreDNS"},
		{"two arguments", ". {\n import a b\n}", "Corefile:2: import takes one file, glob pattern or snippet name"},
		{"itself", "import self\n", "self:1: imports nested more than 10 deep (does a file import itself?)"},
		{"block importing itself", ". {\n import loop.server\n}", "loop.server:2: imports nested more than 10 deep (does a file import itself?)"},
		{"snippet importing itself", "(s) {\n import s\n}\n. {\n import s\n}", "Corefile:2: imports nested more than 10 deep (does a file import itself?)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(filepath.Join(dir, "Corefile"), tt.src, nil)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a *SyntaxError", err)
			}
			if got := strings.TrimPrefix(err.Error(), dir+"/"); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestImportFanOutBounded: a file importing a glob that matches itself
// many times stops at MaxImports, not after 20^10 expansions.
func TestImportFanOutBounded(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	for _, c := range "abcdefghijklmnopqrst" {
		files[string(c)+".inc"] = "import *.inc\n"
	}
	writeFiles(t, dir, files)
	_, err := Parse(filepath.Join(dir, "Corefile"), ". {\n import *.inc\n}", nil)
	if err == nil || !strings.Contains(err.Error(), "imports") {
		t.Fatalf("got %v, want the import limit", err)
	}
}

// TestNestingLimit: a deeply nested file is an error, not a stack
// overflow (#26).
func TestNestingLimit(t *testing.T) {
	src := ". {\n" + strings.Repeat("a {\n", 50000) + strings.Repeat("}\n", 50000) + "}\n"
	_, err := Parse("Corefile", src, nil)
	if err == nil || err.Error() != "Corefile:17: blocks nested more than 16 deep" {
		t.Fatalf("got %v, want the nesting limit at line 17", err)
	}
	ok := ". {\n" + strings.Repeat("a {\n", MaxNesting-1) + strings.Repeat("}\n", MaxNesting-1) + "}\n"
	if _, err := Parse("Corefile", ok, nil); err != nil {
		t.Errorf("nesting %d deep: got %v, want it read", MaxNesting, err)
	}
}

// TestInstallPlaceholders: k3s's %{NAME}% is filled from vars; one
// without a value is an error naming it and its line.
func TestInstallPlaceholders(t *testing.T) {
	src := ".:53 {\n kubernetes %{CLUSTER_DOMAIN}% in-addr.arpa\n}\n"
	cf, err := Parse("Corefile", src, Vars{"CLUSTER_DOMAIN": "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Blocks[0].Directives[0].String(); got != "kubernetes cluster.local in-addr.arpa" {
		t.Errorf("got %q", got)
	}
	_, err = Parse("Corefile", src, nil)
	want := "Corefile:2: %{CLUSTER_DOMAIN}% is filled when the manifest is installed: give its value with --var CLUSTER_DOMAIN=VALUE"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}
