package migrate

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodecache/nodecache/pkg/corefile"
)

// TestTranslateGolden translates, without the command around it, the
// Corefiles of the migrate command's golden tests that need no flags:
// WriteYAML must write want.yaml and Unsupported must list exactly the
// "not reproduced" lines of want.stderr. (internal/cli's TestMigrateGolden
// runs every case through the command, with -update.)
func TestTranslateGolden(t *testing.T) {
	dirs, err := filepath.Glob("../cli/testdata/migrate/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("golden cases: got %v (%v), want some", dirs, err)
	}
	ran := 0
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "args")); err == nil {
			continue // flags of the command (--var, --kube-dns-config): the command's test covers it
		}
		ran++
		t.Run(filepath.Base(dir), func(t *testing.T) {
			text := read(t, filepath.Join(dir, "Corefile"))
			wantYAML := read(t, filepath.Join(dir, "want.yaml"))
			var wantUnsupported []string
			for _, l := range strings.Split(read(t, filepath.Join(dir, "want.stderr")), "\n") {
				if u, ok := strings.CutPrefix(l, "not reproduced: "); ok {
					wantUnsupported = append(wantUnsupported, u)
				}
			}
			cf, err := corefile.Parse("Corefile", text, corefile.Vars{UpstreamPillar: "/etc/resolv.conf"})
			var m *Migration
			if err == nil {
				m, err = Translate(cf, Options{ClusterDomain: "cluster.local"}, "Corefile")
			}
			if err != nil {
				if wantYAML != "" {
					t.Fatalf("got error %v, want the config of want.yaml", err)
				}
				return
			}
			var buf bytes.Buffer
			if err := m.WriteYAML(&buf); err != nil {
				t.Fatal(err)
			}
			if buf.String() != wantYAML {
				t.Errorf("config: got\n%s\nwant\n%s", buf.String(), wantYAML)
			}
			if got := strings.Join(m.Unsupported(), "\n"); got != strings.Join(wantUnsupported, "\n") {
				t.Errorf("unsupported: got\n%s\nwant\n%s", got, strings.Join(wantUnsupported, "\n"))
			}
			if err := Check(buf.Bytes()); err != nil {
				t.Errorf("the config written does not load: %v", err)
			}
		})
	}
	if ran == 0 {
		t.Fatal("every golden case needs flags: none translated")
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
