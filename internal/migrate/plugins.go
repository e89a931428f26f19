package migrate

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nodecache/nodecache/pkg/corefile"
)

// directiveHandler translates one directive of a block.
type directiveHandler func(t *translator, b *blockCtx, d *corefile.Directive) error

// directiveHandlers are the plugins migrate knows. Any other is reported
// as not reproduced.
func directiveHandlers() map[string]directiveHandler {
	noted := func(msg string) directiveHandler {
		return func(t *translator, _ *blockCtx, d *corefile.Directive) error {
			t.m.note(where(t.file, d), msg)
			return nil
		}
	}
	return map[string]directiveHandler{
		"forward":     (*translator).forward,
		"cache":       (*translator).cache,
		"kubernetes":  (*translator).kubernetes,
		"bind":        (*translator).bind,
		"health":      (*translator).health,
		"prometheus":  (*translator).prometheus,
		"autopath":    (*translator).autopath,
		"bufsize":     (*translator).bufsize,
		"pprof":       (*translator).pprof,
		"template":    (*translator).template,
		"errors":      noted("nodecache logs failed upstream queries, rate-limited"),
		"ready":       noted("readiness is /readyz on --health-addr"),
		"reload":      noted("nodecache applies edits of its config file and of the kube-dns ConfigMap live (checked every --config-check-interval, 5s)"),
		"loop":        noted("nodecache refuses, at start, an upstream that is its own address"),
		"any":         noted("nodecache answers ANY queries with the RFC 8482 HINFO record too"),
		"cancel":      noted("every query has a deadline (--upstream-deadline)"),
		"debug":       noted("no effect on answers"),
		"log":         (*translator).log,
		"loadbalance": (*translator).loadbalance,
		"hosts":       (*translator).hosts,
		"rewrite":     (*translator).rewrite,
	}
}

// cache translates `cache [TTL] [ZONES...] { options }`.
func (t *translator) cache(b *blockCtx, d *corefile.Directive) error {
	w := where(t.file, d)
	c := &ttlCaps{pos: corednsMaxTTL, neg: corednsMaxNegTTL, from: w}
	args := d.Args
	if len(args) > 0 {
		if ttl, err := seconds(args[0]); err == nil {
			c.pos, c.neg = ttl, ttl
			args = args[1:]
		}
	}
	if len(args) > 0 {
		t.m.unsupport(w, fmt.Sprintf("nodecache caches every zone of the block, not only %s", strings.Join(args, " ")))
	}
	for _, o := range d.Options {
		if err := t.cacheOption(c, o); err != nil {
			return err
		}
	}
	b.caps = c
	return nil
}

func (t *translator) cacheOption(c *ttlCaps, o *corefile.Directive) error {
	w := where(t.file, o)
	switch o.Name {
	case "success", "denial":
		if len(o.Args) == 0 {
			return fmt.Errorf("line %d: %s wants CAPACITY [TTL [MINTTL]]", o.Line, o.Name)
		}
		t.m.note(w, "nodecache's cache is bounded in bytes (--cache-size), not in entries")
		if len(o.Args) > 1 {
			ttl, err := seconds(o.Args[1])
			if err != nil {
				return fmt.Errorf("line %d: %w", o.Line, err)
			}
			if o.Name == "success" {
				c.pos = ttl
			} else {
				c.neg = ttl
			}
		}
		if len(o.Args) > 2 && o.Args[2] != "5" {
			t.m.unsupport(w, fmt.Sprintf("answers are kept for their own TTL, not at least %ss", o.Args[2]))
		}
	case "serve_stale":
		c.stale = corednsStaleDef
		if len(o.Args) > 0 {
			d, err := corednsDuration(o.Args[0])
			if err != nil {
				return fmt.Errorf("line %d: %w", o.Line, err)
			}
			c.stale, c.staleOff = d, d == 0
		}
		t.m.note(w, "nodecache answers from an expired entry only when the upstreams fail, as serve_stale verify does")
	case "prefetch":
		c.prefetch = true
		t.m.note(w, "nodecache refreshes names asked at least twice when 10% of their TTL is left; the amount and percentage are not settings")
	case "disable":
		if len(o.Args) < 2 || (o.Args[0] != "success" && o.Args[0] != "denial") {
			return fmt.Errorf("line %d: disable wants success|denial ZONES", o.Line)
		}
		for _, z := range o.Args[1:] {
			if k, err := parseServerKey(z); err != nil || k.zone != t.clusterDomain {
				t.m.unsupport(w, fmt.Sprintf("answers under %s are cached", z))
				return nil
			}
		}
		if o.Args[0] == "success" {
			c.noClusterPos = true
		} else {
			c.noClusterNeg = true
		}
		t.m.note(w, "nodecache answers the cluster zone from its live copy, never from the cache")
	case "servfail":
		if len(o.Args) != 1 || o.Args[0] != "5s" {
			t.m.unsupport(w, "SERVFAIL answers are cached for 5s")
		}
	default:
		t.m.unsupport(w, fmt.Sprintf("cache option %s has no nodecache equivalent", o.Name))
	}
	return nil
}

// kubernetes translates the kubernetes plugin: the cluster zone nodecache
// serves itself.
func (t *translator) kubernetes(b *blockCtx, d *corefile.Directive) error {
	w := where(t.file, d)
	t.m.set("cluster-domain", strings.TrimSuffix(t.clusterDomain, "."), w)
	zones := d.Args
	if len(zones) == 0 {
		zones = b.zones
	}
	for _, z := range zones {
		if k, err := parseServerKey(z); err == nil && isReverseZone(k.zone) {
			t.m.note(w, "nodecache answers reverse lookups of service and pod IPs in "+k.zone)
		}
	}
	for _, o := range d.Options {
		ow := where(t.file, o)
		switch o.Name {
		case "pods":
			if len(o.Args) != 1 || !slices.Contains([]string{"insecure", "verified", "disabled"}, o.Args[0]) {
				return fmt.Errorf("line %d: pods wants insecure, verified or disabled", o.Line)
			}
			t.m.set("pods", o.Args[0], ow)
			if o.Args[0] == "verified" {
				t.m.set("watch-pods", "true", ow+" (verified pod records need every pod: give the DaemonSet the pod-access grant, deploy/overlays/pod-access)")
			}
		case "ttl":
			ttl, err := seconds(strings.Join(o.Args, " "))
			if err != nil {
				return fmt.Errorf("line %d: %w", o.Line, err)
			}
			t.zoneTTL, t.zoneTTLFrom = ttl, ow
		case "fallthrough":
			t.m.note(ow, "names under the reverse zones that the cluster zone does not own go to the upstreams")
		case "upstream":
			t.m.note(ow, "no effect (CoreDNS ignores it too)")
		case "kubeconfig", "endpoint", "tls":
			t.m.note(ow, "nodecache reaches the API server with its own --kubeconfig, or in a pod its ServiceAccount (the DaemonSet's)")
		default:
			t.m.unsupport(ow, fmt.Sprintf("kubernetes option %s is not reproduced: the cluster zone is answered without it", o.Name))
		}
	}
	return nil
}

func (t *translator) autopath(_ *blockCtx, d *corefile.Directive) error {
	w := where(t.file, d)
	if len(d.Args) == 1 && d.Args[0] == "@kubernetes" {
		t.m.set("autopath", "true", w)
		t.m.set("watch-pods", "true", w+" (autopath needs the node's pods: give the DaemonSet the pod-access grant, deploy/overlays/pod-access)")
		return nil
	}
	t.m.unsupport(w, "autopath from a resolv.conf or another plugin is not reproduced: pods walk their search path themselves")
	return nil
}

func (t *translator) bufsize(_ *blockCtx, d *corefile.Directive) error {
	if len(d.Args) == 1 && d.Args[0] == "1232" {
		t.m.note(where(t.file, d), "nodecache advertises 1232 bytes too")
		return nil
	}
	t.m.unsupport(where(t.file, d), "nodecache advertises an EDNS buffer of 1232 bytes")
	return nil
}

// log translates `log [NAMES...]` into the sampled query log: CoreDNS
// logs every query, nodecache at most query-log-rate lines a second.
func (t *translator) log(_ *blockCtx, d *corefile.Directive) error {
	w := where(t.file, d)
	if len(d.Options) > 0 {
		t.m.note(w, "log options (class, format) are not reproduced; nodecache's query log is off unless query-log-rate is set (query-log-rcode filters it by rcode)")
		return nil
	}
	t.m.set("query-log-rate", "100", w+" (at most 100 lines a second; CoreDNS logs every query)")
	if names := d.Args; len(names) > 1 || len(names) == 1 && names[0] != "." {
		t.m.set("query-log-suffix", strings.Join(names, ","), w)
	}
	return nil
}
