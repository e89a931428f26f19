package resolvconf

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// domains returns n domains of the form d<i>.example.
func domains(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("d%d.example", i)
	}
	return out
}

// wide returns n domains of 240 characters.
func wide(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.Repeat(string(rune('b'+i)), 240)
	}
	return out
}

// The cases follow kubelet's GetPodDNS; the ones marked "old" are where the
// two builders this package replaced (explain's podResolverConf and
// autopath's searchPath) gave another list.
type podSearchCase struct {
	name   string
	domain string
	host   []string
	pod    Pod
	want   []string
}

func podSearchCases() []podSearchCase {
	cluster := []string{"demo.svc.cluster.local", "svc.cluster.local", "cluster.local"}
	long := strings.Repeat("a", 250) + ".example" // 258 characters
	return []podSearchCase{
		{"ClusterFirst: cluster's three, then the node's", "cluster.local", []string{"corp.example"},
			Pod{Namespace: "demo", DNSPolicy: "ClusterFirst"}, append(cluster, "corp.example")},
		{"empty policy is ClusterFirst; trailing dot on the domain ignored", "cluster.local.", nil,
			Pod{Namespace: "demo"}, cluster},
		{"old: node list naming the cluster domain is not repeated", "cluster.local", []string{"cluster.local", "corp.example"},
			Pod{Namespace: "demo"}, append(cluster, "corp.example")},
		{"old: duplicates are exact, case kept apart as kubelet does", "cluster.local", []string{"Cluster.Local"},
			Pod{Namespace: "demo"}, append(cluster, "Cluster.Local")},
		{"old: 32 domains at most", "cluster.local", domains(40),
			Pod{Namespace: "demo"}, append(cluster, domains(29)...)},
		{"old: a domain over 253 characters is dropped", "cluster.local", []string{long, "corp.example"},
			Pod{Namespace: "demo"}, append(cluster, "corp.example")},
		// The cluster's three take 54 characters with their spaces, each
		// 240-character domain 241 more: eight fit (1982), a ninth does not
		// (2223), so the ninth and the one after it are cut.
		{"old: the line is cut from the end to 2048 characters", "cluster.local",
			append(wide(9), "last.example"), Pod{Namespace: "demo"}, append(cluster, wide(8)...)},
		{"ClusterFirst without a cluster domain: the node's list", "", []string{"corp.example"},
			Pod{Namespace: "demo"}, []string{"corp.example"}},
		{"ClusterFirstWithHostNet on the host network: the cluster's", "cluster.local", []string{"corp.example"},
			Pod{Namespace: "demo", DNSPolicy: "ClusterFirstWithHostNet", HostNetwork: true}, append(cluster, "corp.example")},
		{"ClusterFirst on the host network falls back to Default", "cluster.local", []string{"corp.example"},
			Pod{Namespace: "demo", DNSPolicy: "ClusterFirst", HostNetwork: true}, []string{"corp.example"}},
		{"Default: the node's list", "cluster.local", []string{"corp.example", "lab.example"},
			Pod{Namespace: "demo", DNSPolicy: "Default"}, []string{"corp.example", "lab.example"}},
		{"None: empty", "cluster.local", []string{"corp.example"},
			Pod{Namespace: "demo", DNSPolicy: "None"}, []string{}},
		{"None with dnsConfig: its searches", "cluster.local", []string{"corp.example"},
			Pod{Namespace: "demo", DNSPolicy: "None", Searches: []string{"x.example"}}, []string{"x.example"}},
		{"dnsConfig searches appended, duplicates dropped", "cluster.local", []string{"corp.example"},
			Pod{Namespace: "demo", Searches: []string{"corp.example", "x.example"}}, append(cluster, "corp.example", "x.example")},
	}
}

func TestPodSearch(t *testing.T) {
	for _, tt := range podSearchCases() {
		t.Run(tt.name, func(t *testing.T) {
			host := append([]string(nil), tt.host...)
			got := PodSearch(tt.domain, host, tt.pod)
			if len(got) != 0 || len(tt.want) != 0 {
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("got  %q\nwant %q", got, tt.want)
				}
			}
			if !reflect.DeepEqual(host, tt.host) && (host != nil || tt.host != nil) {
				t.Errorf("changed the node's list to %q", host)
			}
		})
	}
}
