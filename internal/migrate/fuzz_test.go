package migrate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nodecache/nodecache/pkg/corefile"
)

// FuzzMigrate feeds Corefiles to the translation: it must never panic,
// whatever config it writes must load in `nodecache run`, and the config
// must set exactly what the translation decided (Values), so no
// Corefile text can add a key or change a value through a comment. The
// seeds are the Corefiles of the migrate command's golden tests and the
// stock Corefiles.
func FuzzMigrate(f *testing.F) {
	seeds, _ := filepath.Glob("../cli/testdata/migrate/*/Corefile")
	stock, _ := filepath.Glob("../cli/testdata/corpus/*/Corefile")
	if len(seeds) == 0 || len(stock) == 0 {
		f.Fatal("no seed Corefiles in ../cli/testdata/migrate and ../cli/testdata/corpus")
	}
	for _, s := range append(seeds, stock...) {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Add(".:53 {\n hosts {\n  \"10.0.0.1 a\\nupstream: 6.6.6.6\"\n }\n forward . tls://192.0.2.1 {\n  tls_servername a.example\n }\n}\n")
	f.Fuzz(func(t *testing.T, text string) {
		vars := corefile.Vars{UpstreamPillar: "/etc/resolv.conf", "CLUSTER_DOMAIN": "cluster.local"}
		cf, err := corefile.ParseOptions("Corefile", text, corefile.Options{Vars: vars, Import: noImports})
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
		var doc map[string]any
		if err := yaml.Unmarshal(buf.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for k, v := range doc {
			if list, ok := v.([]any); ok {
				for _, it := range list {
					got[k] = append(got[k], fmt.Sprint(it))
				}
				continue
			}
			got[k] = []string{fmt.Sprint(v)}
		}
		if want := m.Values(); !reflect.DeepEqual(got, want) {
			t.Fatalf("the config says\n%v\nthe translation set\n%v\n%s", got, want, buf.String())
		}
	})
}

// noImports reads no file: a fuzzed import names nothing.
func noImports(string, string) ([]corefile.Source, error) { return nil, nil }
