package helmchart

import (
	"testing"

	"helm.sh/helm/v4/pkg/action"
)

// TestLint runs `helm lint --strict` on the chart, with the defaults and
// with every optional object on: a warning fails.
func TestLint(t *testing.T) {
	for _, vals := range []map[string]any{
		nil,
		{
			"podAccess": true, "nftOnly": true,
			"interceptKubeDNS": map[string]any{"enabled": true, "clusterIP": "10.96.0.10"},
			"podMonitor":       map[string]any{"enabled": true},
			"prometheusRule":   map[string]any{"enabled": true},
			"dashboard":        map[string]any{"enabled": true},
		},
	} {
		l := action.NewLint()
		l.Strict = true
		l.Namespace = "kube-system"
		res := l.Run([]string{chartDir}, vals)
		if res.TotalChartsLinted != 1 {
			t.Errorf("helm lint linted %d charts, want 1", res.TotalChartsLinted)
		}
		for _, m := range res.Messages {
			t.Logf("helm lint: %s", m)
		}
		for _, err := range res.Errors {
			t.Errorf("helm lint --strict with %v: %v", vals, err)
		}
		if action.HasWarningsOrErrors(res) && len(res.Errors) == 0 {
			t.Errorf("helm lint --strict with %v: warnings (above)", vals)
		}
	}
}
