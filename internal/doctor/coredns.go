package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nodecache/nodecache/pkg/corefile"
)

// The coredns check: pods that ask nodecache never reach the cluster's
// CoreDNS, so whatever its Corefile adds to kubeadm's defaults (static
// records, rewrites, stub domains, other upstreams, plugins) no longer
// applies to them unless nodecache's own config reproduces it.

// kubeadmDirectives are the plugins of kubeadm's default Corefile.
// loadbalance is kubeadm's too, but not listed: nodecache shuffles answers
// only with its loadbalance setting (settingFor), so without it pods that
// take the first address lose what it did.
var kubeadmDirectives = []string{"errors", "health", "ready", "kubernetes", "prometheus", "forward", "cache", "loop", "reload"} //nolint:gochecknoglobals // constant list

// checkCoreDNS warns of each customisation of the coredns Corefile.
func (e *Env) checkCoreDNS(ctx context.Context) []Finding {
	const check = "coredns"
	if e.CoreDNS == nil {
		return []Finding{{Check: check, Severity: Skip,
			Detail: "not checked: no API credentials (in-cluster, $KUBECONFIG or ~/.kube/config)",
			Fix:    "give --kubeconfig to check the coredns ConfigMap"}}
	}
	text, err := e.CoreDNS(ctx)
	if err != nil {
		return []Finding{{Check: check, Severity: Warn, Detail: "cannot read the coredns ConfigMap: " + err.Error(),
			Fix: "check the kubeconfig and that it may get configmaps in kube-system"}}
	}
	// Imports name files in CoreDNS's pod (coredns-custom), not on this
	// node: none is read here.
	noFiles := func(string, string) ([]corefile.Source, error) { return nil, nil }
	cf, err := corefile.ParseOptions("coredns", text, corefile.Options{Import: noFiles})
	if err != nil {
		return []Finding{{Check: check, Severity: Warn, Detail: "the coredns Corefile does not parse: " + err.Error()}}
	}
	domain := "cluster.local"
	if e.st != nil && e.st.Config["cluster-domain"] != "" {
		domain = e.st.Config["cluster-domain"]
	}
	lost := map[int]string{}
	var unsupported []string
	if e.Unsupported != nil {
		unsupported, _ = e.Unsupported(cf, domain) // an error loses only the reasons
	}
	for _, u := range unsupported {
		var line int
		if _, err := fmt.Sscanf(u, "coredns:%d", &line); err == nil && lost[line] == "" {
			lost[line] = u[strings.Index(u, ": ")+2:]
		}
	}
	var out []Finding
	for _, c := range customisations(cf) {
		if key, ok := settingFor[c.Name]; ok && e.st != nil && e.st.Config[key] == "true" {
			continue // the running agent reproduces it
		}
		detail := fmt.Sprintf("coredns:%d %s: pods using nodecache bypass it", c.Line, c.String())
		fix := "run `nodecache migrate --from-cluster` and merge what it writes into nodecache's ConfigMap"
		if why := lost[c.Line]; why != "" {
			detail += "; nodecache cannot reproduce it: " + why
			fix = "keep these names on CoreDNS (a stub domain pointing at it), or accept the change"
		} else if key, ok := settingFor[c.Name]; ok {
			fix = fmt.Sprintf("set %s: true in nodecache's config (nodecache migrate --from-cluster writes it)", key)
		}
		out = append(out, Finding{Check: check, Severity: Warn, Detail: detail, Fix: fix})
	}
	if len(out) == 0 {
		out = append(out, Finding{Check: check, Severity: OK, Detail: "the coredns Corefile has only kubeadm's defaults: nothing is bypassed"})
	}
	return out
}

// settingFor maps the plugins that a boolean setting of nodecache
// reproduces whole to that setting: with it "true" in the agent's status
// the directive is not bypassed.
var settingFor = map[string]string{"loadbalance": "loadbalance"} //nolint:gochecknoglobals // constant map

// customisations are the directives of a Corefile beyond kubeadm's
// defaults: other plugins, forward to other than /etc/resolv.conf, and
// every directive of a server block for another zone.
func customisations(cf *corefile.Corefile) []*corefile.Directive {
	var out []*corefile.Directive
	for _, b := range cf.Blocks {
		root := len(b.Keys) == 1 && (b.Keys[0] == "." || b.Keys[0] == ".:53")
		for _, d := range b.Directives {
			switch {
			case !root:
				if d.Name == "forward" || d.Name == "hosts" || d.Name == "rewrite" || !slices.Contains(kubeadmDirectives, d.Name) {
					out = append(out, d)
				}
			case !slices.Contains(kubeadmDirectives, d.Name):
				out = append(out, d)
			case d.Name == "forward" && (len(d.Args) != 2 || d.Args[0] != "." || d.Args[1] != "/etc/resolv.conf"):
				out = append(out, d)
			}
		}
	}
	return out
}
