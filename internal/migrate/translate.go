package migrate

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/corefile"
)

// clusterDNSPillar is node-local-dns's name for the cluster DNS service,
// which its node-cache binary fills in at run time. nodecache answers the
// cluster zone itself, from the API server.
const clusterDNSPillar = "__PILLAR__CLUSTER__DNS__"

// UpstreamPillar is node-local-dns's name for the node's resolvers, filled
// in at run time from /etc/resolv.conf.
const UpstreamPillar = "__PILLAR__UPSTREAM__SERVERS__"

// CoreDNS's cache defaults (plugin/cache): the longest positive and
// negative TTLs kept when the Corefile gives none.
const (
	corednsMaxTTL     = 3600 * time.Second
	corednsMaxNegTTL  = 1800 * time.Second
	corednsMinTTL     = 5 * time.Second
	corednsStaleDef   = time.Hour
	nodecacheZoneTTL  = 5 * time.Second // --ttl's default, also the kubernetes plugin's
	defaultLocalIP    = "169.254.20.10"
	defaultHealthPort = "8080"
	defaultPromPort   = "9253"
)

// Options are the inputs of a translation besides the Corefile.
type Options struct {
	ClusterDomain string // used when no kubernetes plugin names one
}

// blockCtx is one server block being translated.
type blockCtx struct {
	zones []string // lowercased FQDNs
	caps  *ttlCaps // the block's cache; nil without one
	hasK8 bool     // the block runs the kubernetes plugin
	// hosts: the block has a hosts plugin, whose answers carry hostsTTL
	// (its ttl option, else 3600) capped by the block's cache.
	hosts        bool
	hostsTTL     time.Duration
	hostsTTLFrom string
}

// ttlCaps are what a cache directive keeps: longest positive and
// negative TTLs, and serve-stale.
type ttlCaps struct {
	pos, neg time.Duration
	stale    time.Duration // 0: no serve_stale
	prefetch bool          // the prefetch option
	from     string
	// noClusterPos and noClusterNeg: `disable success|denial CLUSTER`:
	// the cluster zone's answers are not capped by this cache.
	noClusterPos, noClusterNeg bool
}

type translator struct {
	m             *Migration
	file          string
	clusterDomain string // lowercased FQDN
	localIPs      []string
	blocks        []*blockCtx
	stubs         map[string]*stubOut // by zone
	stubOrder     []string            // zones in Corefile order
	zoneTTL       time.Duration       // the kubernetes plugin's ttl
	servesCluster bool                // a kubernetes plugin, or node-local-dns's forward to the cluster DNS
	zoneTTLFrom   string
}

// Translate turns cf, read from source, into a Migration. It fails only on input CoreDNS
// itself would refuse, or on placeholders without values.
func Translate(cf *corefile.Corefile, o Options, source string) (*Migration, error) {
	t := &translator{m: newMigration(source), file: cf.File, stubs: map[string]*stubOut{}, zoneTTL: nodecacheZoneTTL}
	if err := checkPillars(cf); err != nil {
		return nil, err
	}
	t.clusterDomain = dns.Fqdn(strings.ToLower(o.ClusterDomain))
	t.findClusterDomain(cf)
	for _, b := range cf.Blocks {
		if err := t.block(b); err != nil {
			return nil, err
		}
	}
	t.finish()
	return t.m, nil
}

// checkPillars refuses node-local-dns variables left without a value,
// but for the two node-cache fills in at run time.
func checkPillars(cf *corefile.Corefile) error {
	check := func(line int, words []string) error {
		for _, w := range words {
			for _, p := range corefile.Pillars(w) {
				if p != clusterDNSPillar && p != UpstreamPillar {
					return fmt.Errorf("%s:%d: %s has no value: give it with --var %s=VALUE (the node-local-dns manifest is filled in when it is installed)",
						cf.File, line, p, p)
				}
			}
		}
		return nil
	}
	var walk func(ds []*corefile.Directive) error
	walk = func(ds []*corefile.Directive) error {
		for _, d := range ds {
			if err := check(d.Line, append([]string{d.Name}, d.Args...)); err != nil {
				return err
			}
			if err := walk(d.Options); err != nil {
				return err
			}
		}
		return nil
	}
	for _, b := range cf.Blocks {
		if err := check(b.Line, b.Keys); err != nil {
			return err
		}
		if err := walk(b.Directives); err != nil {
			return err
		}
	}
	return nil
}

// findClusterDomain takes the first forward zone of a kubernetes plugin,
// else the zone of a node-local-dns block that forwards to the cluster
// DNS service, else keeps the --cluster-domain given.
func (t *translator) findClusterDomain(cf *corefile.Corefile) {
	nodeLocal, nodeLocalFrom := "", ""
	for _, b := range cf.Blocks {
		for _, d := range b.Directives {
			switch {
			case d.Name == "kubernetes":
				zones := d.Args
				if len(zones) == 0 {
					zones = b.Keys
				}
				t.servesCluster = true
				if z := forwardZone(zones); z != "" {
					t.clusterDomain = z
					return
				}
			case d.Name == "forward" && nodeLocal == "" && slices.Contains(d.Args, clusterDNSPillar):
				nodeLocal = forwardZone(b.Keys)
				nodeLocalFrom = fmt.Sprintf("%s:%d %s (the block that forwards to the cluster DNS)", t.file, b.Line, strings.Join(b.Keys, " "))
			}
		}
	}
	if nodeLocal != "" {
		t.m.set("kube-dns-config-dir", kubeDNSMountPath, "node-local-dns reads the kube-dns ConfigMap (stubDomains, upstreamNameservers); so does nodecache, where the DaemonSet mounts it")
		t.clusterDomain, t.servesCluster = nodeLocal, true
		t.m.set("cluster-domain", strings.TrimSuffix(nodeLocal, "."), nodeLocalFrom)
	}
}

// forwardZone returns the first zone of keys that is neither the root
// nor a reverse zone.
func forwardZone(keys []string) string {
	for _, z := range keys {
		if k, err := parseServerKey(z); err == nil && !isReverseZone(k.zone) && k.zone != "." {
			return k.zone
		}
	}
	return ""
}

// serverKey is one address of a server block.
type serverKey struct{ scheme, zone, port string }

func parseServerKey(k string) (serverKey, error) {
	out := serverKey{scheme: "dns", port: "53"}
	if s, rest, ok := strings.Cut(k, "://"); ok {
		out.scheme, k = strings.ToLower(s), rest
	}
	if i := strings.LastIndexByte(k, ':'); i >= 0 && !strings.Contains(k[:i], ":") {
		out.port, k = k[i+1:], k[:i]
	}
	if k == "" {
		k = "."
	}
	if strings.Contains(k, "/") {
		return out, fmt.Errorf("zone %q is a network: write the reverse zone (in-addr.arpa) it stands for", k)
	}
	if _, ok := dns.IsDomainName(k); !ok {
		return out, fmt.Errorf("%q is not a zone", k)
	}
	out.zone = dns.Fqdn(strings.ToLower(k))
	return out, nil
}

func isReverseZone(z string) bool {
	return dns.IsSubDomain("in-addr.arpa.", z) || dns.IsSubDomain("ip6.arpa.", z)
}

// block translates one server block.
func (t *translator) block(b *corefile.Block) error {
	from := fmt.Sprintf("%s:%d %s", t.file, b.Line, strings.Join(b.Keys, " "))
	bc := &blockCtx{}
	for _, k := range b.Keys {
		sk, err := parseServerKey(k)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", t.file, b.Line, err)
		}
		switch {
		case sk.scheme != "dns":
			t.m.unsupport(from, fmt.Sprintf("nodecache serves plain DNS only; clients of %s://%s get no answer", sk.scheme, sk.zone))
			return nil
		case sk.port != "53":
			t.m.unsupport(from, fmt.Sprintf("nodecache serves one port (--port, 53); clients of port %s get no answer", sk.port))
			return nil
		}
		bc.zones = append(bc.zones, sk.zone)
	}
	for _, d := range b.Directives {
		if d.Name == "kubernetes" {
			bc.hasK8 = true
		}
	}
	t.blocks = append(t.blocks, bc)
	for _, d := range b.Directives {
		h, ok := directiveHandlers()[d.Name]
		if !ok {
			t.m.unsupport(where(t.file, d), fmt.Sprintf("the %s plugin has no nodecache equivalent; what it does for %s is lost",
				d.Name, strings.Join(bc.zones, " ")))
			continue
		}
		if err := h(t, bc, d); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", t.file, d.Line, d.Name, err)
		}
	}
	return nil
}

// blockFor returns the block that serves name: the one whose zone is
// the longest suffix of it.
func (t *translator) blockFor(name string) *blockCtx {
	var best *blockCtx
	bestLen := -1
	for _, b := range t.blocks {
		for _, z := range b.zones {
			if dns.IsSubDomain(z, name) && dns.CountLabel(z) > bestLen {
				best, bestLen = b, dns.CountLabel(z)
			}
		}
	}
	return best
}

// finish sets what depends on every block: TTL caps.
func (t *translator) finish() {
	root := t.blockFor(".")
	var rootCaps *ttlCaps
	if root != nil && root.caps != nil {
		rootCaps = root.caps
		t.m.set("max-ttl", rootCaps.pos.String(), rootCaps.from)
		t.m.set("max-negative-ttl", rootCaps.neg.String(), rootCaps.from)
		if rootCaps.stale > 0 {
			t.m.set("stale-max-age", rootCaps.stale.String(), rootCaps.from)
		} else {
			t.m.set("stale-max-age", "0s", rootCaps.from+" (no serve_stale: expired answers are never served)")
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

func dedupe(in []string) []string {
	var out []string
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
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

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// seconds parses a Corefile TTL: whole seconds.
func seconds(s string) (time.Duration, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number of seconds", s)
	}
	return time.Duration(n) * time.Second, nil
}

// corednsDuration parses a Go duration, or whole seconds as CoreDNS also
// takes in a few places.
func corednsDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	return seconds(s)
}

// hostPortIP parses "IP:port" or ":port" into its parts (IP may be "").
func hostPortIP(s string) (ip, port string, err error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", "", fmt.Errorf("%q is not [IP]:port", s)
	}
	ip, port = strings.Trim(s[:i], "[]"), s[i+1:]
	if ip != "" {
		if _, err := netip.ParseAddr(ip); err != nil {
			return "", "", fmt.Errorf("%q: %q is not an IP (nodecache listens on IPs, not host names)", s, ip)
		}
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", "", fmt.Errorf("%q: bad port", s)
	}
	return ip, port, nil
}
