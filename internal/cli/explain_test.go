package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/nodecache/nodecache/pkg/kubezone"
	"github.com/nodecache/nodecache/pkg/resolvconf"
)

// TestPodConf checks that explain takes the pod's DNS policy into account:
// the node's resolv.conf for Default and host-network pods, an error for
// a pod with its own DNS config, the cluster's search path otherwise.
func TestPodConf(t *testing.T) {
	// A stub resolver on the node searches other.example (the last line);
	// kubelet reads only search lines, so pods inherit corp.example.
	host, err := resolvconf.Parse(strings.NewReader("search corp.example.\ndomain other.example\n"))
	if err != nil {
		t.Fatal(err)
	}
	o := &explainOpts{domain: "cluster.local"}
	for _, tt := range []struct {
		pod        kubezone.PodInfo
		wantSearch string // "" with wantErr
		wantErr    bool
	}{
		{kubezone.PodInfo{Namespace: "demo", Name: "a", DNSPolicy: "ClusterFirst"}, "demo.svc.cluster.local svc.cluster.local cluster.local corp.example", false},
		{kubezone.PodInfo{Namespace: "demo", Name: "b", DNSPolicy: "Default"}, "corp.example", false},
		{kubezone.PodInfo{Namespace: "demo", Name: "c", DNSPolicy: "ClusterFirst", HostNetwork: true}, "corp.example", false},
		{kubezone.PodInfo{Namespace: "demo", Name: "d", DNSPolicy: "ClusterFirstWithHostNet", HostNetwork: true}, "demo.svc.cluster.local svc.cluster.local cluster.local corp.example", false},
		{kubezone.PodInfo{Namespace: "demo", Name: "e", DNSPolicy: "None"}, "", true},
		{kubezone.PodInfo{Namespace: "demo", Name: "f", DNSPolicy: "ClusterFirst", CustomDNS: true}, "", true},
	} {
		conf, err := podConf(context.Background(), nil, o, tt.pod, host)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s (%s): got error %v, want error %v", tt.pod.Name, tt.pod.DNSPolicy, err, tt.wantErr)
			continue
		}
		if got := strings.Join(conf.Search, " "); !tt.wantErr && got != tt.wantSearch {
			t.Errorf("%s (%s): got search %q, want %q", tt.pod.Name, tt.pod.DNSPolicy, got, tt.wantSearch)
		}
	}
}
