package helmchart

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sameObjects wants got and want to hold the same objects, each equal
// after normalize, and names every difference.
func sameObjects(t *testing.T, what string, got, want map[string]object) {
	t.Helper()
	gk := slices.Sorted(maps.Keys(got))
	wk := slices.Sorted(maps.Keys(want))
	if !slices.Equal(gk, wk) {
		t.Errorf("%s: the chart renders\n  %s\nwant the objects\n  %s", what, strings.Join(gk, "\n  "), strings.Join(wk, "\n  "))
	}
	for _, k := range wk {
		g, ok := got[k]
		if !ok {
			continue
		}
		if d := cmp.Diff(normalize(t, want[k]), normalize(t, g)); d != "" {
			t.Errorf("%s: %s differs (-kustomize +helm):\n%s", what, k, d)
		}
	}
}

// TestDefaultsAreTheBase: `helm install` with the default values creates
// the objects of `kubectl apply -k deploy/base`, field for field.
func TestDefaultsAreTheBase(t *testing.T) {
	base := kustomize(t, repo+"/deploy/base")
	if len(base) < 8 {
		t.Fatalf("deploy/base renders %d objects, want the DaemonSet, its ConfigMap, Service and RBAC", len(base))
	}
	sameObjects(t, "defaults", mustRender(t, nil), base)
}

// TestOverlaysAreValues: each overlay of deploy/overlays is one value of
// the chart, and renders the same objects.
func TestOverlaysAreValues(t *testing.T) {
	for _, c := range []struct {
		overlay string
		values  map[string]any
	}{
		{"intercept-kube-dns", map[string]any{"interceptKubeDNS": map[string]any{"enabled": true, "clusterIP": "10.96.0.10"}}},
		{"pod-access", map[string]any{"podAccess": true}},
		{"nft-only", map[string]any{"nftOnly": true}},
	} {
		t.Run(c.overlay, func(t *testing.T) {
			want := kustomize(t, repo+"/deploy/overlays/"+c.overlay)
			got := mustRender(t, c.values)
			sameObjects(t, c.overlay, got, want)
			// The overlay changes something: a value that renders the base
			// would pass the comparison above only if the overlay did nothing.
			base := mustRender(t, nil)
			if cmp.Equal(normalize(t, got["DaemonSet kube-system/nodecache"]), normalize(t, base["DaemonSet kube-system/nodecache"])) {
				t.Errorf("%s: the DaemonSet is the default one", c.overlay)
			}
		})
	}
}

// TestMonitoringIsDeployMonitoring: podMonitor and prometheusRule render
// deploy/monitoring's PodMonitor and PrometheusRule (the alerts come from
// the chart's copy of the file, which must not drift from it).
func TestMonitoringIsDeployMonitoring(t *testing.T) {
	want := kustomize(t, repo+"/deploy/monitoring")
	got := mustRender(t, map[string]any{
		"podMonitor":     map[string]any{"enabled": true},
		"prometheusRule": map[string]any{"enabled": true},
	})
	for k := range kustomize(t, repo+"/deploy/base") {
		delete(got, k)
	}
	sameObjects(t, "monitoring", got, want)
	if copyOf, orig := readFile(t, "deploy/helm/nodecache/files/prometheusrule.yaml"), readFile(t, "deploy/monitoring/prometheusrule.yaml"); string(copyOf) != string(orig) {
		t.Error("deploy/helm/nodecache/files/prometheusrule.yaml differs from deploy/monitoring/prometheusrule.yaml: copy it over")
	}
}

// TestDashboardConfigMap: the dashboard ConfigMap holds
// deploy/grafana-dashboard.json as it is, with the sidecar's label.
func TestDashboardConfigMap(t *testing.T) {
	objs := mustRender(t, map[string]any{"dashboard": map[string]any{"enabled": true, "namespace": "monitoring"}})
	cm, ok := objs["ConfigMap monitoring/nodecache-dashboard"]
	if !ok {
		t.Fatalf("no ConfigMap monitoring/nodecache-dashboard among %v", slices.Sorted(maps.Keys(objs)))
	}
	data, _ := cm["data"].(map[string]any)
	got, _ := data["nodecache.json"].(string)
	want := strings.TrimRight(string(readFile(t, "deploy/grafana-dashboard.json")), "\n")
	if got != want {
		t.Errorf("dashboard ConfigMap: nodecache.json is %d bytes, want deploy/grafana-dashboard.json's %d bytes as they are (is files/grafana-dashboard.json a copy of it?)", len(got), len(want))
	}
	labels := cm["metadata"].(map[string]any)["labels"].(map[string]any)
	if labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v: want grafana_dashboard: \"1\"", labels)
	}
	if _, off := mustRender(t, nil)["ConfigMap kube-system/nodecache-dashboard"]; off {
		t.Error("the dashboard ConfigMap is rendered with dashboard.enabled false")
	}
}

// TestServiceMonitor: the ServiceMonitor selects the metrics Service by
// labels it has and scrapes the port by a name it has, and names the job
// as the PodMonitor does.
func TestServiceMonitor(t *testing.T) {
	objs := mustRender(t, map[string]any{"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}}})
	sm := objs["ServiceMonitor kube-system/nodecache"]
	svc := objs["Service kube-system/nodecache-metrics"]
	if sm == nil || svc == nil {
		t.Fatalf("want a ServiceMonitor and the metrics Service, got %v", slices.Sorted(maps.Keys(objs)))
	}
	svcLabels := svc["metadata"].(map[string]any)["labels"].(map[string]any)
	spec := sm["spec"].(map[string]any)
	for k, v := range spec["selector"].(map[string]any)["matchLabels"].(map[string]any) {
		if svcLabels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%v; the Service's labels are %v", k, v, svcLabels)
		}
	}
	if job := spec["jobLabel"].(string); svcLabels[job] != "nodecache" {
		t.Errorf("ServiceMonitor jobLabel %s: the Service's is %v, want nodecache (the alerts' job)", job, svcLabels[job])
	}
	port := spec["endpoints"].([]any)[0].(map[string]any)["port"]
	if p := svc["spec"].(map[string]any)["ports"].([]any)[0].(map[string]any)["name"]; p != port {
		t.Errorf("ServiceMonitor scrapes port %v, the Service's port is named %v", port, p)
	}
	if l := sm["metadata"].(map[string]any)["labels"].(map[string]any)["release"]; l != "prom" {
		t.Errorf("serviceMonitor.labels: got release=%v on the ServiceMonitor, want prom", l)
	}
}

// TestBadValues: values that cannot work stop the install with a line
// that says what to set.
func TestBadValues(t *testing.T) {
	for _, c := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"local-ip in config", map[string]any{"config": map[string]any{"local-ip": "10.0.0.1"}}, "config.local-ip: set it with the chart's value localIP"},
		{"upstream in config", map[string]any{"config": map[string]any{"upstream": "10.0.0.1"}}, "value upstreams"},
		{"no upstream", map[string]any{"upstreams": []any{}}, "upstreams: give at least one"},
		{"both monitors", map[string]any{"podMonitor": map[string]any{"enabled": true}, "serviceMonitor": map[string]any{"enabled": true}}, "choose one"},
		{"intercept without a cluster", map[string]any{"interceptKubeDNS": map[string]any{"enabled": true}}, "set interceptKubeDNS.clusterIP"},
		// values.schema.json
		{"a misspelt value", map[string]any{"nodeselector": map[string]any{"pool": "dns"}}, "nodeselector"},
		{"a bad pull policy", map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}, "pullPolicy"},
		{"a port that is not a number", map[string]any{"metrics": map[string]any{"port": "metrics"}}, "port"},
		{"maxSurge 0", map[string]any{"maxSurge": 0}, "maxSurge"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := render(t, c.values)
			t.Logf("%v", err)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("rendering with %v: got %v, want an error with %q", c.values, err, c.want)
			}
		})
	}
}
