package gendocs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository, seen from this package's directory.
const repoRoot = "../.."

// pendingPages are linked from README.md but written on other branches; a
// link to one of them is not checked while it is missing. Once a page
// exists, its entry must go, so the list cannot go stale.
var pendingPages = map[string]bool{}

// TestMarkdownLinks checks every relative link in every Markdown file of
// the repository: the target exists inside the repository and, for a
// #fragment into a Markdown file, the heading exists there. Nothing may
// point outside the repository.
func TestMarkdownLinks(t *testing.T) {
	for page := range pendingPages {
		if _, err := os.Stat(filepath.Join(repoRoot, page)); err == nil {
			t.Errorf("%s exists now: remove it from pendingPages so links to it are checked", page)
		}
	}
	files := markdownFiles(t, repoRoot)
	if len(files) < 5 {
		t.Fatalf("found %d Markdown files under %s, want README.md, docs/ and more", len(files), repoRoot)
	}
	anchors := map[string]map[string]bool{}
	for _, f := range files {
		for _, l := range links(t, filepath.Join(repoRoot, f)) {
			if err := checkLink(f, l, anchors); err != "" {
				t.Errorf("%s: link %q: %s", f, l, err)
			}
		}
	}
}

var codePathRe = regexp.MustCompile("`((?:cmd|pkg|internal|deploy|e2e|bench|docs|\\.ci)/[A-Za-z0-9_./-]*)`")

// TestMarkdownPathsExist checks that every repository path a Markdown file
// names in code spans (`pkg/server/answer.go`) exists, so a moved or
// renamed file does not leave the docs behind.
func TestMarkdownPathsExist(t *testing.T) {
	for _, f := range markdownFiles(t, repoRoot) {
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range codePathRe.FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(filepath.Join(repoRoot, m[1])); err != nil {
				t.Errorf("%s names %s: no such path in the repository", f, m[1])
			}
		}
	}
}

// markdownFiles returns the .md files under root, relative to it, skipping
// hidden directories (.git).
func markdownFiles(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var linkRe = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// links returns the link targets of a Markdown file, outside code blocks
// and inline code.
func links(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || strings.HasPrefix(line, "    ") {
			continue
		}
		for _, m := range linkRe.FindAllStringSubmatch(stripInlineCode(line), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// stripInlineCode removes `code` spans from line.
func stripInlineCode(line string) string {
	var b strings.Builder
	in := false
	for _, r := range line {
		if r == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkLink returns what is wrong with link target l in file f, or "".
func checkLink(f, l string, anchors map[string]map[string]bool) string {
	if strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "mailto:") {
		return ""
	}
	path, frag, _ := strings.Cut(l, "#")
	if strings.HasPrefix(path, "/") {
		return "an absolute path: link relative to the file"
	}
	target := f
	if path != "" {
		target = filepath.ToSlash(filepath.Join(filepath.Dir(f), path))
	}
	if target == ".." || strings.HasPrefix(target, "../") {
		return "points outside the repository"
	}
	if pendingPages[target] {
		if _, err := os.Stat(filepath.Join(repoRoot, target)); err != nil {
			return ""
		}
	}
	if _, err := os.Stat(filepath.Join(repoRoot, target)); err != nil {
		return "no such file in the repository"
	}
	if frag == "" || !strings.HasSuffix(target, ".md") {
		return ""
	}
	if anchors[target] == nil {
		anchors[target] = headingAnchors(filepath.Join(repoRoot, target))
	}
	if !anchors[target][frag] {
		return "no heading #" + frag + " in " + target
	}
	return ""
}

// headingAnchors returns the anchors GitHub makes for the headings of a
// Markdown file (duplicates get -1, -2, ...).
func headingAnchors(path string) map[string]bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		s := slug(strings.TrimLeft(line, "#"))
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// slug is GitHub's anchor for a heading: lowercased, spaces to hyphens,
// punctuation other than hyphens and underscores dropped.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(strings.ReplaceAll(h, "`", ""))) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		" Upgrades: the socket handover":                "upgrades-the-socket-handover",
		" Bad input and overload: one place, one rcode": "bad-input-and-overload-one-place-one-rcode",
		" nodecache run":                                "nodecache-run",
		" The host side: `pkg/iface`":                   "the-host-side-pkgiface",
		" Where nodecache differs from CoreDNS":         "where-nodecache-differs-from-coredns",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q): got %q, want %q", h, got, want)
		}
	}
}

func TestCheckLinkFindsBrokenLinks(t *testing.T) {
	anchors := map[string]map[string]bool{}
	for _, tc := range []struct{ file, link, wantErr string }{
		{"README.md", "docs/architecture.md", ""},
		{"README.md", "docs/architecture.md#start-order", ""},
		{"README.md", "docs/architecture.md#no-such-heading", "no heading"},
		{"README.md", "docs/nosuch.md", "no such file"},
		{"README.md", "../shared/DNS-BEHAVIOUR.md", "outside the repository"},
		{"docs/cli.md", "../../shared/x.md", "outside the repository"},
		{"README.md", "/work/shared/x.md", "absolute path"},
		{"README.md", "https://example.com/", ""},
	} {
		got := checkLink(tc.file, tc.link, anchors)
		if (tc.wantErr == "") != (got == "") || !strings.Contains(got, tc.wantErr) {
			t.Errorf("checkLink(%s, %s): got %q, want %q", tc.file, tc.link, got, tc.wantErr)
		}
	}
}
