package helmchart

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chartloader "helm.sh/helm/v4/pkg/chart/loader"
	"helm.sh/helm/v4/pkg/engine"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// repo is the repository root, seen from this package.
const repo = "../.."

const chartDir = repo + "/deploy/helm/nodecache"

// object is one rendered Kubernetes object, as JSON decodes it.
type object = map[string]any

// objKey names an object: kind, namespace, name.
func objKey(o object) string {
	md, _ := o["metadata"].(map[string]any)
	return fmt.Sprintf("%v %v/%v", o["kind"], md["namespace"], md["name"])
}

// render renders the chart as `helm install nodecache deploy/helm/nodecache
// -n kube-system` would, with values over the chart's defaults, and returns
// its objects by key. A template error is returned, not fatal.
func render(t testing.TB, values map[string]any) (map[string]object, error) {
	t.Helper()
	ch, err := chartloader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	opts := common.ReleaseOptions{Name: "nodecache", Namespace: "kube-system", Revision: 1, IsInstall: true}
	vals, err := util.ToRenderValues(ch, values, opts, nil)
	if err != nil {
		return nil, err
	}
	out, err := engine.Render(ch, vals)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	objs := map[string]object{}
	for _, n := range names {
		if !strings.HasSuffix(n, ".yaml") {
			continue // NOTES.txt, helpers
		}
		for _, doc := range strings.Split(out[n], "\n---") {
			var o object
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("%s: rendered YAML does not parse: %v\n%s", n, err, doc)
			}
			if len(o) == 0 {
				continue
			}
			k := objKey(o)
			if _, dup := objs[k]; dup {
				t.Fatalf("%s: %s rendered twice", n, k)
			}
			objs[k] = o
		}
	}
	return objs, nil
}

// mustRender is render that fails t on a template error.
func mustRender(t testing.TB, values map[string]any) map[string]object {
	t.Helper()
	objs, err := render(t, values)
	if err != nil {
		t.Fatalf("rendering the chart with %v: %v", values, err)
	}
	return objs
}

// kustomize renders a kustomization directory as `kubectl kustomize` does.
func kustomize(t testing.TB, dir string) map[string]object {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	objs := map[string]object{}
	for _, r := range rm.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatalf("kustomize %s: %v", dir, err)
		}
		objs[objKey(m)] = m
	}
	return objs
}

// helmLabels are the labels the chart adds that deploy/base does not have:
// Helm's own, which say which release and chart made an object.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// normalize makes an object comparable: JSON's numbers, Helm's own labels
// gone, and each ConfigMap's config.yaml parsed, so that the order of its
// keys and its comments do not count (the agent reads it as a map).
func normalize(t testing.TB, o object) object {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var n object
	if err := json.Unmarshal(b, &n); err != nil {
		t.Fatal(err)
	}
	dropLabels(n)
	if spec, ok := n["spec"].(map[string]any); ok {
		if tmpl, ok := spec["template"].(map[string]any); ok {
			dropLabels(tmpl)
		}
	}
	if n["kind"] == "ConfigMap" {
		if data, ok := n["data"].(map[string]any); ok {
			if s, ok := data["config.yaml"].(string); ok {
				var cfg map[string]any
				if err := yaml.Unmarshal([]byte(s), &cfg); err != nil {
					t.Fatalf("%s: config.yaml: %v", objKey(n), err)
				}
				data["config.yaml"] = cfg
			}
		}
	}
	return n
}

func dropLabels(o map[string]any) {
	md, _ := o["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	for _, l := range helmLabels {
		delete(labels, l)
	}
}

// readFile reads a repository file.
func readFile(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
