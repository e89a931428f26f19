package resolvconf

import (
	"strings"
	"testing"
)

// FuzzPodSearch reads a node resolv.conf and checks that the pod's search
// list keeps kubelet's limits, holds no duplicate and starts with the
// cluster's three for a ClusterFirst pod.
func FuzzPodSearch(f *testing.F) {
	f.Add("search corp.example cluster.local\nnameserver 10.0.0.1\n", "demo", "cluster.local")
	f.Add("domain a.example\nsearch "+strings.Repeat("x.example ", 50)+"\n", "kube-system", "")
	f.Fuzz(func(t *testing.T, file, ns, domain string) {
		c, err := Parse(strings.NewReader(file))
		if err != nil {
			t.Skip("a line too long for bufio.Scanner: ", err)
		}
		got := PodSearch(domain, c.Search, Pod{Namespace: ns})
		if len(got) > MaxSearchPaths || len(strings.Join(got, " ")) > MaxSearchListChars {
			t.Fatalf("over the limits: %d domains, %d characters", len(got), len(strings.Join(got, " ")))
		}
		seen := map[string]bool{}
		for _, d := range got {
			if len(d) > maxDomainLen || seen[d] {
				t.Fatalf("domain %q too long or repeated in %q", d, got)
			}
			seen[d] = true
		}
		d := strings.TrimSuffix(domain, ".")
		first := ns + ".svc." + d
		if d != "" && len(first)+len(" svc."+d+" "+d) <= MaxSearchListChars && len(first) <= maxDomainLen &&
			(len(got) == 0 || got[0] != first) {
			t.Fatalf("ClusterFirst list %q does not start with %q", got, first)
		}
	})
}
