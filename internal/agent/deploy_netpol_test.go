package agent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDeployNetworkPolicyExample: the example for default-deny clusters
// allows what the base serves, the local IP and the DNS port over UDP and
// TCP, so that an edit of one is seen to need the other.
func TestDeployNetworkPolicyExample(t *testing.T) {
	data, err := os.ReadFile("../../deploy/examples/networkpolicy-dns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var np struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			PodSelector map[string]any `json:"podSelector"`
			PolicyTypes []string       `json:"policyTypes"`
			Egress      []struct {
				To []struct {
					IPBlock struct {
						CIDR string `json:"cidr"`
					} `json:"ipBlock"`
				} `json:"to"`
				Ports []struct {
					Protocol string `json:"protocol"`
					Port     uint   `json:"port"`
				} `json:"ports"`
			} `json:"egress"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(data, &np); err != nil {
		t.Fatal(err)
	}
	path := baseConfigFile(t)
	cfg, err := ParseConfig([]string{"--config", path})
	if err != nil {
		t.Fatal(err)
	}
	if np.Kind != "NetworkPolicy" || len(np.Spec.PodSelector) != 0 || !slices.Equal(np.Spec.PolicyTypes, []string{"Egress"}) || len(np.Spec.Egress) != 1 {
		t.Fatalf("got %+v, want one Egress rule for every pod of the namespace", np)
	}
	rule := np.Spec.Egress[0]
	var cidrs []string
	for _, to := range rule.To {
		cidrs = append(cidrs, to.IPBlock.CIDR)
	}
	if want := cfg.LocalIPs[0].String() + "/32"; !slices.Equal(cidrs, []string{want}) {
		t.Errorf("egress to %v, want the base's local IP %s", cidrs, want)
	}
	var protos []string
	for _, p := range rule.Ports {
		if p.Port != cfg.Port {
			t.Errorf("port %s/%d, want the base's DNS port %d", p.Protocol, p.Port, cfg.Port)
		}
		protos = append(protos, p.Protocol)
	}
	if slices.Sort(protos); !slices.Equal(protos, []string{"TCP", "UDP"}) {
		t.Errorf("protocols %v, want UDP and TCP (truncated answers retry over TCP)", protos)
	}
}

// baseConfigFile writes deploy/base's config.yaml (the ConfigMap's data)
// into a temporary file and returns its path.
func baseConfigFile(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../deploy/base/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(data, &cm); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := writeFile(path, cm.Data["config.yaml"]); err != nil {
		t.Fatal(err)
	}
	return path
}
