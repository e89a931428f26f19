package migrate

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nodecache/nodecache/pkg/corefile"
)

// translated is what a Corefile became: the config's keys, its text, and
// the "not reproduced" lines.
type translated struct {
	keys        map[string]any
	text        string
	unsupported string
}

func translateText(t *testing.T, src string) translated {
	t.Helper()
	cf, err := corefile.Parse("Corefile", src, corefile.Vars{UpstreamPillar: "/etc/resolv.conf"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Translate(cf, Options{ClusterDomain: "cluster.local"}, "Corefile")
	if err != nil {
		t.Fatalf("Translate: %v", err)
	}
	var buf bytes.Buffer
	if err := m.WriteYAML(&buf); err != nil {
		t.Fatal(err)
	}
	if err := Check(buf.Bytes()); err != nil {
		t.Fatalf("the config written does not load: %v\n%s", err, buf.String())
	}
	out := translated{text: buf.String(), unsupported: strings.Join(m.Unsupported(), "\n")}
	if err := yaml.Unmarshal(buf.Bytes(), &out.keys); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStockMistranslations: the shapes of stock Corefiles that migrate
// got wrong (#25). Each case failed on the code before its fix (force_tcp,
// noIPv6Lookups, loadbalance and the stub zone under the cluster domain
// were reported as lost until the agent had their settings).
func TestStockMistranslations(t *testing.T) {
	tests := []struct {
		name, src string
		check     func(t *testing.T, got translated)
	}{
		{"prometheus on every address (CoreDNS Helm chart, RKE2)", ".:53 {\n prometheus 0.0.0.0:9153\n forward . 192.0.2.1\n}\n",
			func(t *testing.T, got translated) {
				noKey(t, got, "metrics-addr")
				has(t, got.text, "prometheus 0.0.0.0:9153: left out: nodecache refuses to listen on every address; the DaemonSet sets --metrics-addr=$(HOST_IP):9253")
			}},
		{"bind and health on every address (node-local-dns chart)", "cluster.local:53 {\n bind 0.0.0.0\n forward . __PILLAR__CLUSTER__DNS__\n health 0.0.0.0:8080\n}\n.:53 {\n bind 0.0.0.0\n forward . 192.0.2.1\n}\n",
			func(t *testing.T, got translated) {
				noKey(t, got, "local-ip")
				noKey(t, got, "health-addr")
				has(t, got.text, "bind 0.0.0.0 (also lines 7): CoreDNS listened on every address; nodecache serves on its local IPs only, and the DaemonSet's config sets local-ip")
			}},
		{"OpenShift's 5353", ".:5353 {\n kubernetes cluster.local in-addr.arpa ip6.arpa\n forward . /etc/resolv.conf {\n  policy sequential\n }\n cache 900 {\n  denial 9984 30\n }\n}\nhostname.bind:5353 {\n chaos\n}\n",
			func(t *testing.T, got translated) {
				wantKey(t, got, "upstream-policy", "sequential")
				wantKey(t, got, "max-ttl", "15m0s")
				has(t, got.text, "CoreDNS listens on port 5353 behind the cluster DNS Service, which maps port 53 to it")
				if strings.Contains(got.unsupported, "port 5353") {
					t.Errorf("got %q, want no loss for port 5353", got.unsupported)
				}
			}},
		{"kubespray's dns_domain cluster.prod", "cluster.prod:53 {\n forward . 10.233.0.3 {\n  force_tcp\n }\n}\nin-addr.arpa:53 {\n forward . 10.233.0.3 {\n  force_tcp\n }\n}\n.:53 {\n forward . /etc/resolv.conf\n}\n",
			func(t *testing.T, got translated) {
				wantKey(t, got, "cluster-domain", "cluster.prod")
				noKey(t, got, "stub-domain")
			}},
		{"serve-stale kept on", ".:53 {\n cache 30\n forward . 192.0.2.1\n}\n",
			func(t *testing.T, got translated) {
				noKey(t, got, "stale-max-age")
				has(t, got.text, "no serve_stale: CoreDNS answered SERVFAIL once an entry expired while the upstreams failed; nodecache keeps its stale-max-age (1h)")
			}},
		{"serve_stale 0 turns it off", ".:53 {\n cache 30 {\n  serve_stale 0s\n }\n forward . 192.0.2.1\n}\n",
			func(t *testing.T, got translated) { wantKey(t, got, "stale-max-age", "0s") }},
		{"force_tcp to the default upstreams", ".:53 {\n forward . 192.0.2.1 {\n  force_tcp\n }\n}\n",
			func(t *testing.T, got translated) {
				wantKey(t, got, "upstream-force-tcp", true)
				noLoss(t, got)
			}},
		{"prefer_udp to the default upstreams", ".:53 {\n forward . 192.0.2.1 {\n  prefer_udp\n }\n}\n",
			func(t *testing.T, got translated) { wantKey(t, got, "upstream-force-tcp", false) }},
		{"loadbalance (kubeadm, EKS)", ".:53 {\n kubernetes cluster.local in-addr.arpa ip6.arpa\n forward . 192.0.2.1\n loadbalance\n}\n",
			func(t *testing.T, got translated) {
				wantKey(t, got, "loadbalance", true)
				noLoss(t, got)
			}},
		{"loadbalance weighted", ".:53 {\n forward . 192.0.2.1\n loadbalance weighted /etc/w\n}\n",
			func(t *testing.T, got translated) {
				noKey(t, got, "loadbalance")
				has(t, got.unsupported, "loadbalance weighted is not reproduced")
			}},
		{"AAAA suppression in one zone", ".:53 {\n forward . 192.0.2.1\n template IN AAAA example.com {\n  rcode NOERROR\n }\n}\n",
			func(t *testing.T, got translated) {
				if s, _ := got.keys["suppress-aaaa"].([]any); len(s) != 1 || s[0] != "example.com" {
					t.Errorf("suppress-aaaa: got %v, want [example.com]", got.keys["suppress-aaaa"])
				}
				noLoss(t, got)
			}},
		{"autopath and pods verified need watch-pods", ".:53 {\n kubernetes cluster.local {\n  pods verified\n }\n autopath @kubernetes\n forward . 192.0.2.1\n}\n",
			func(t *testing.T, got translated) {
				wantKey(t, got, "watch-pods", true)
				wantKey(t, got, "autopath", true)
				has(t, got.text, "deploy/overlays/pod-access")
			}},
		{"noIPv6Lookups", "cluster.local:53 {\n forward . __PILLAR__CLUSTER__DNS__\n template IN AAAA {\n  rcode NOERROR\n }\n}\n.:53 {\n forward . 192.0.2.1\n template IN AAAA {\n  rcode NOERROR\n }\n}\n",
			func(t *testing.T, got translated) {
				wantKey(t, got, "suppress-aaaa", ".")
				noLoss(t, got)
			}},
		{"stub zone under the cluster domain (AKS my.cluster.local)", ".:53 {\n kubernetes cluster.local\n forward . 192.0.2.1\n}\nmy.cluster.local:53 {\n forward . 2.3.4.5\n}\nabc.com:53 {\n forward . 1.2.3.4\n}\n",
			func(t *testing.T, got translated) {
				if s, _ := got.keys["stub-domain"].([]any); len(s) != 2 || s[0] != "my.cluster.local=2.3.4.5" || s[1] != "abc.com=1.2.3.4" {
					t.Errorf("stub-domain: got %v, want my.cluster.local=2.3.4.5 and abc.com=1.2.3.4", got.keys["stub-domain"])
				}
				has(t, got.text, "names under my.cluster.local go to this stub domain's servers, not to the cluster zone")
				noLoss(t, got)
			}},
		{"kubernetes kubeconfig and endpoint are the agent's own", ".:53 {\n kubernetes cluster.local {\n  kubeconfig /etc/kube.conf\n  endpoint https://10.0.0.1:6443\n }\n forward . 192.0.2.1\n}\n",
			func(t *testing.T, got translated) {
				noLoss(t, got)
				has(t, got.text, "nodecache reaches the API server with its own --kubeconfig")
			}},
		{"pprof keeps CoreDNS's loopback", ".:53 {\n pprof 127.0.0.1:6060\n forward . 192.0.2.1\n}\n",
			func(t *testing.T, got translated) {
				wantKey(t, got, "pprof", true)
				wantKey(t, got, "pprof-addr", "127.0.0.1:6060")
				if strings.Contains(got.text, "metrics listener") {
					t.Errorf("got %q, want pprof off the metrics listener", got.text)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, translateText(t, tt.src)) })
	}
}

// TestOutputNotSteered: Corefile text cannot add settings to the config
// written, nor change what its comments say (#26).
func TestOutputNotSteered(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"a line break in a quoted word", ".:53 {\n hosts {\n  \"10.0.0.1 a\nupstream: 6.6.6.6\"\n  fallthrough\n }\n forward . 192.0.2.1\n}\n",
			"Corefile:3: a word holds a control character (U+000A): the config written cannot carry it"},
		{"a carriage return", ".:53 {\n forward . 192.0.2.1\n log \"a\rb\"\n}\n", "Corefile:3: a word holds a control character (U+000D): the config written cannot carry it"},
		{"tls_servername with a comma", ".:53 {\n forward . tls://192.0.2.1 {\n  tls_servername dns.example,192.0.2.66\n }\n}\n",
			"Corefile:2: forward: line 3: tls_servername: \"dns.example,192.0.2.66\" is not a host name"},
		{"tls_servername with a space", ".:53 {\n forward . tls://192.0.2.1 {\n  tls_servername \"dns.example 192.0.2.66\"\n }\n}\n",
			"Corefile:2: forward: line 3: tls_servername: \"dns.example 192.0.2.66\" is not a host name"},
		{"a comma in a forward target", ".:53 {\n forward . 192.0.2.1,192.0.2.66\n}\n",
			"Corefile:2: forward: \"192.0.2.1,192.0.2.66\": a forward target is one server or file; write several as separate words"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cf, err := corefile.Parse("Corefile", tt.src, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Translate(cf, Options{ClusterDomain: "cluster.local"}, "Corefile")
			if err == nil || err.Error() != tt.want {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func has(t *testing.T, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Errorf("got\n%s\nwant it to hold %q", got, want)
	}
}

func noLoss(t *testing.T, got translated) {
	t.Helper()
	if got.unsupported != "" {
		t.Errorf("not reproduced: got %q, want nothing", got.unsupported)
	}
}

func noKey(t *testing.T, got translated, key string) {
	t.Helper()
	if v, ok := got.keys[key]; ok {
		t.Errorf("got %s: %v, want no %s\n%s", key, v, key, got.text)
	}
}

func wantKey(t *testing.T, got translated, key string, want any) {
	t.Helper()
	if v := got.keys[key]; v != want {
		t.Errorf("got %s: %v, want %v\n%s", key, v, want, got.text)
	}
}
