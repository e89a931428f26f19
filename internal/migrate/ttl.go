package migrate

import (
	"fmt"
	"strings"
	"time"
)

// ttlCaps are what a cache directive keeps: longest positive and
// negative TTLs, and serve-stale.
type ttlCaps struct {
	pos, neg time.Duration
	stale    time.Duration // 0: no serve_stale
	staleOff bool          // serve_stale 0: turned off
	prefetch bool          // the prefetch option
	from     string
	// noClusterPos and noClusterNeg: `disable success|denial CLUSTER`:
	// the cluster zone's answers are not capped by this cache.
	noClusterPos, noClusterNeg bool
}

// finish sets what depends on every block: TTL caps.
func (t *translator) finish() {
	root := t.blockFor(".")
	var rootCaps *ttlCaps
	if root != nil && root.caps != nil {
		rootCaps = root.caps
		t.m.set("max-ttl", rootCaps.pos.String(), rootCaps.from)
		t.m.set("max-negative-ttl", rootCaps.neg.String(), rootCaps.from)
		switch {
		case rootCaps.stale > 0:
			t.m.set("stale-max-age", rootCaps.stale.String(), rootCaps.from)
		case rootCaps.staleOff:
			t.m.set("stale-max-age", "0s", rootCaps.from+" (serve_stale 0: expired answers are never served)")
		default:
			t.m.note(rootCaps.from, "no serve_stale: CoreDNS answered SERVFAIL once an entry expired while the upstreams failed; nodecache keeps its stale-max-age (1h) and answers from the expired entry then")
		}
		if !rootCaps.prefetch {
			t.m.set("prefetch", "false", rootCaps.from+" (no prefetch: a name is asked again only after it expired)")
		}
	} else if root != nil {
		t.m.note(fmt.Sprintf("%s .", t.file), "no cache in the root block: nodecache caches answers for their TTL (at most 1h)")
	}
	for _, z := range t.stubOrder {
		t.finishStub(z, t.stubs[z], rootCaps)
	}
	t.clusterTTLs()
	t.staticTTL()
	t.finishAAAA()
	t.loadbalanceNote()
}

// staticTTL sets the TTL of static records: the hosts plugin's, capped by
// the cache of its block, which CoreDNS runs before hosts.
func (t *translator) staticTTL() {
	for _, b := range t.blocks {
		if !b.hosts {
			continue
		}
		ttl, from := time.Hour, "the hosts plugin's default ttl 3600"
		if b.hostsTTLFrom != "" {
			ttl, from = b.hostsTTL, b.hostsTTLFrom
		}
		if b.caps != nil && b.caps.pos < ttl {
			ttl, from = b.caps.pos, b.caps.from+" (CoreDNS caches hosts answers too)"
		}
		t.m.set("static-ttl", ttl.String(), from)
	}
}

// finishStub writes a stub domain with its options, and the TTL caps of
// its block's cache where they differ from the root block's.
func (t *translator) finishStub(zone string, s *stubOut, rootCaps *ttlCaps) {
	c := s.block.caps
	switch {
	case c == nil && rootCaps != nil:
		t.m.unsupport("(no cache in the block of "+zone+")", fmt.Sprintf("answers under %s are cached %s", zone, describeCaps(rootCaps)))
	case c != nil:
		base := rootCaps
		if base == nil {
			base = &ttlCaps{pos: time.Hour, neg: time.Hour} // nodecache's defaults
		}
		if c.pos != base.pos {
			s.option("max-ttl="+c.pos.String(), c.from)
		}
		if c.neg != base.neg {
			s.option("max-negative-ttl="+c.neg.String(), c.from)
		}
		if rootCaps != nil && c.stale != rootCaps.stale {
			t.m.unsupport(c.from, fmt.Sprintf("expired answers under %s are served as for every zone (stale-max-age %v)", zone, rootCaps.stale))
		}
	}
	value := strings.TrimSuffix(zone, ".") + "=" + s.servers
	if len(s.opts) > 0 {
		value += " " + strings.Join(s.opts, " ")
	}
	t.m.add("stub-domain", value, strings.Join(dedupe(s.from), "; "))
}

// clusterTTLs sets the cluster zone's TTLs: the kubernetes plugin's ttl,
// capped by the cache of the block that serves the cluster domain.
func (t *translator) clusterTTLs() {
	b := t.blockFor(t.clusterDomain)
	if !t.servesCluster || b == nil || (b.caps == nil && t.zoneTTLFrom == "") {
		return
	}
	ttl, ttlFrom := t.zoneTTL, t.zoneTTLFrom
	if ttlFrom == "" {
		ttlFrom = "the kubernetes plugin's default ttl 5 (the cluster's CoreDNS may set another)"
	}
	neg, negFrom := ttl, ttlFrom
	if c := b.caps; c != nil {
		if c.pos < ttl && !c.noClusterPos {
			ttl, ttlFrom = c.pos, c.from
		}
		if c.neg < neg && !c.noClusterNeg {
			neg, negFrom = c.neg, c.from
		}
	}
	if ttl < time.Second || neg < time.Second {
		t.m.unsupport(ttlFrom, "cluster-zone answers with a TTL under 1s; nodecache's --ttl and --negative-ttl are at least 1s")
		return
	}
	t.m.set("ttl", ttl.String(), ttlFrom)
	t.m.set("negative-ttl", neg.String(), negFrom)
}

func describeCaps(c *ttlCaps) string {
	if c == nil {
		return "for their TTL (at most 1h)"
	}
	return fmt.Sprintf("for at most %v (NXDOMAIN and NODATA %v)", c.pos, c.neg)
}
