package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nodecache/nodecache/pkg/corefile"
	"github.com/nodecache/nodecache/pkg/upstream"
)

// forwardTargets are the TO arguments of a forward directive, by kind.
type forwardTargets struct {
	ips     []string // IP[:port], validated
	paths   []string // resolv.conf files
	tls     []string // tls://IP[:port]
	cluster bool     // node-local-dns's __PILLAR__CLUSTER__DNS__
}

func parseForwardTargets(args []string) (forwardTargets, error) {
	var t forwardTargets
	for _, to := range args {
		lower := strings.ToLower(to)
		switch {
		case to == clusterDNSPillar:
			t.cluster = true
		case strings.HasPrefix(lower, "tls://"):
			t.tls = append(t.tls, to)
		case strings.Contains(lower, "://") && !strings.HasPrefix(lower, "dns://"):
			return t, fmt.Errorf("%q: forward takes dns:// and tls:// servers", to)
		case strings.Contains(strings.TrimPrefix(lower, "dns://"), "/"):
			t.paths = append(t.paths, to)
		default:
			ip := to[len(to)-len(strings.TrimPrefix(lower, "dns://")):]
			if _, err := upstream.ParseServers(ip); err != nil {
				return t, err
			}
			t.ips = append(t.ips, ip)
		}
	}
	return t, nil
}

// forward translates `forward FROM TO... { options }`.
func (t *translator) forward(b *blockCtx, d *corefile.Directive) error {
	if len(d.Args) < 2 {
		return errors.New("want forward FROM TO [TO...]")
	}
	w := where(t.file, d)
	zones := b.zones
	if d.Args[0] != "." {
		k, err := parseServerKey(d.Args[0])
		if err != nil {
			return err
		}
		zones = []string{k.zone}
	}
	to, err := parseForwardTargets(d.Args[1:])
	if err != nil {
		return err
	}
	for _, z := range zones {
		switch {
		case to.cluster || z == t.clusterDomain || (isReverseZone(z) && b.hasK8):
			t.m.note(w, "nodecache answers the cluster zone itself from the API server, and sends the names it does not own to the default upstreams; this forward's options do not apply")
			continue
		case z == ".":
			t.rootForward(w, to)
		default:
			t.stubForward(b, z, w, to)
		}
		t.forwardOptions(z, d)
	}
	return nil
}

func (t *translator) rootForward(w string, to forwardTargets) {
	switch {
	case len(to.tls) > 0:
		t.m.unsupport(w, "DNS over TLS upstreams are not supported: pods' queries go in plain DNS to the other servers listed, or to the node's /etc/resolv.conf servers")
	case len(to.paths) > 0 && len(to.ips) > 0, len(to.paths) > 1:
		t.m.unsupport(w, "nodecache takes either a resolv.conf or a list of IPs as its upstream: only the first resolv.conf is used")
	}
	switch {
	case len(to.paths) > 0:
		t.m.set("upstream", to.paths[0], w)
	case len(to.ips) > 0:
		t.m.set("upstream", strings.Join(to.ips, ","), w)
	}
}

func (t *translator) stubForward(b *blockCtx, zone, w string, to forwardTargets) {
	if len(to.tls) > 0 {
		t.m.unsupport(w, fmt.Sprintf("DNS over TLS upstreams are not supported: names under %s go in plain DNS to the other servers listed, or to the default upstreams", zone))
	}
	if len(to.paths) > 0 {
		t.m.unsupport(w, fmt.Sprintf("a stub domain takes IPs, not a resolv.conf: names under %s go to the default upstreams", zone))
	}
	if len(to.ips) == 0 {
		return
	}
	t.m.add("stub-domain", strings.TrimSuffix(zone, ".")+"="+strings.Join(to.ips, ","), w)
	t.stubs[zone] = b
}

// forwardOptions translates the options of a forward for zone.
func (t *translator) forwardOptions(zone string, d *corefile.Directive) {
	root := zone == "."
	for _, o := range d.Options {
		w := where(t.file, o)
		switch o.Name {
		case "policy":
			if root && len(o.Args) == 1 {
				t.m.set("upstream-policy", o.Args[0], w)
			} else if len(o.Args) != 1 || o.Args[0] != upstream.PolicyRandom {
				t.m.unsupport(w, fmt.Sprintf("servers of %s are tried in the order of --upstream-policy, not %s", zone, strings.Join(o.Args, " ")))
			}
		case "max_concurrent":
			if root && len(o.Args) == 1 {
				t.m.set("max-upstream-inflight", o.Args[0], w+" (the cap covers every upstream query)")
			} else {
				t.m.unsupport(w, fmt.Sprintf("queries under %s share the agent's --max-upstream-inflight cap", zone))
			}
		case "force_tcp":
			t.m.unsupport(w, fmt.Sprintf("queries under %s go over UDP first, and over TCP only after a truncated reply", zone))
		case "prefer_udp":
			t.m.note(w, "nodecache always sends UDP first and retries over TCP after a truncated reply")
		case "expire":
			t.m.note(w, "nodecache closes idle upstream TCP connections after 10s")
		case "max_fails", "health_check":
			t.m.note(w, "nodecache marks a server down after 3 failed tries in a row and probes it (from 1s, backing off); down servers are still tried last")
		case "tls", "tls_servername":
			t.m.unsupport(w, "DNS over TLS upstreams are not supported")
		case "except":
			t.m.unsupport(w, fmt.Sprintf("names under %s go to this forward's servers too", strings.Join(o.Args, " ")))
		default:
			t.m.unsupport(w, fmt.Sprintf("forward option %s has no nodecache equivalent", o.Name))
		}
	}
}
