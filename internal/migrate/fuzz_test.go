package migrate

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodecache/nodecache/pkg/corefile"
)

// FuzzMigrate feeds Corefiles to the translation: it must never panic,
// and whatever config it writes must load in `nodecache run`. The seeds
// are the Corefiles of the migrate command's golden tests.
func FuzzMigrate(f *testing.F) {
	seeds, _ := filepath.Glob("../cli/testdata/migrate/*/Corefile")
	if len(seeds) == 0 {
		f.Fatal("no seed Corefiles in ../cli/testdata/migrate")
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Fuzz(func(t *testing.T, text string) {
		cf, err := corefile.Parse("Corefile", text, corefile.Vars{UpstreamPillar: "/etc/resolv.conf"})
		if err != nil {
			return // bad input: an error, as wanted
		}
		m, err := Translate(cf, Options{ClusterDomain: "cluster.local"}, "Corefile")
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := m.WriteYAML(&buf); err != nil {
			t.Fatal(err)
		}
		if err := Check(buf.Bytes()); err != nil {
			t.Fatalf("the config written does not load: %v\n%s", err, buf.String())
		}
	})
}
