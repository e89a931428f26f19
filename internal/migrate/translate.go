package migrate

import (
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/corefile"
)

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
	loadbalance  bool // the block shuffles its answers
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
	clusterDNS    []string            // the cluster DNS's servers, where a node-local cache names them by IP
	port          string              // the port the root block serves: 53, or one a Service maps 53 to
	zoneTTLFrom   string
	noAAAA        []item // zones whose AAAA queries a template answered NODATA
}

// Translate turns cf, read from source, into a Migration. It fails only on input CoreDNS
// itself would refuse, or on placeholders without values.
func Translate(cf *corefile.Corefile, o Options, source string) (*Migration, error) {
	t := &translator{m: newMigration(source), file: cf.File, stubs: map[string]*stubOut{}, zoneTTL: nodecacheZoneTTL}
	if err := checkWords(cf); err != nil {
		return nil, err
	}
	t.clusterDomain = dns.Fqdn(strings.ToLower(o.ClusterDomain))
	t.findClusterDomain(cf)
	t.findPort(cf)
	for _, b := range cf.Blocks {
		if err := t.block(b); err != nil {
			return nil, err
		}
	}
	t.finish()
	t.importNotes(cf.Imports)
	return t.m, nil
}

// importNotes says which files each import read.
func (t *translator) importNotes(imports []corefile.Import) {
	for _, im := range imports {
		w := fmt.Sprintf("%s:%d import %s", im.File, im.Line, im.Pattern)
		if len(im.Files) == 0 {
			t.m.note(w, "matched no file here: if the cluster's CoreDNS has files there (the coredns-custom ConfigMap), give them with --import-dir DIR or use --from-cluster, and migrate again")
			continue
		}
		t.m.note(w, "read "+strings.Join(im.Files, ", "))
	}
}

// findPort takes the port of the root block as the one pods reach: 53,
// or the port a Service maps 53 to (OpenShift's dns-default maps 53 to
// 5353).
func (t *translator) findPort(cf *corefile.Corefile) {
	t.port = "53"
	for _, b := range cf.Blocks {
		for _, k := range b.Keys {
			if sk, err := parseServerKey(k); err == nil && sk.zone == "." && sk.scheme == "dns" {
				t.port = sk.port
				if t.port != "53" {
					t.m.note(blockWhere(b), fmt.Sprintf("CoreDNS listens on port %s behind the cluster DNS Service, which maps port 53 to it; nodecache serves port 53 (--port) on its local IPs, where pods ask", t.port))
				}
				return
			}
		}
	}
}

// block translates one server block.
func (t *translator) block(b *corefile.Block) error {
	from := blockWhere(b)
	bc := &blockCtx{}
	for _, k := range b.Keys {
		sk, err := parseServerKey(k)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", b.File, b.Line, err)
		}
		switch {
		case sk.scheme != "dns":
			t.m.unsupport(from, fmt.Sprintf("nodecache serves plain DNS only; clients of %s://%s get no answer", sk.scheme, sk.zone))
			return nil
		case sk.port != t.port:
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
			return fmt.Errorf("%s:%d: %s: %w", d.File, d.Line, d.Name, err)
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
