package migrate

import (
	"fmt"
	"strings"

	"github.com/nodecache/nodecache/pkg/corefile"
)

// The plugins that shape answers rather than say where they come from:
// loadbalance (--loadbalance) and the AAAA-suppressing template of the
// node-local-dns chart's noIPv6Lookups (--suppress-aaaa).

// loadbalance translates `loadbalance [round_robin]`: nodecache shuffles
// the A and AAAA records of every answer. CoreDNS's weighted policy reads
// a weights file nodecache has no equivalent of.
func (t *translator) loadbalance(b *blockCtx, d *corefile.Directive) error {
	w := where(t.file, d)
	if len(d.Args) > 0 && d.Args[0] != "round_robin" {
		t.m.unsupport(w, fmt.Sprintf("loadbalance %s is not reproduced: nodecache shuffles address records at random (round_robin) or not at all", d.Args[0]))
		return nil
	}
	t.m.set("loadbalance", "true", w)
	b.loadbalance = true
	return nil
}

// loadbalanceNote says that the shuffle is for every answer when the
// Corefile shuffled only in some blocks.
func (t *translator) loadbalanceNote() {
	if _, on := t.m.settings["loadbalance"]; !on {
		return
	}
	var without []string
	for _, b := range t.blocks {
		if !b.loadbalance {
			for _, z := range b.zones {
				without = append(without, strings.TrimSuffix(z, "."))
			}
		}
	}
	if len(without) > 0 {
		t.m.note(t.m.settings["loadbalance"].from, "nodecache shuffles every answer's addresses, also those under "+strings.Join(without, ", ")+", where CoreDNS kept the upstream's order")
	}
}

// template translates the one template the stock Corefiles hold, the
// node-local-dns chart's noIPv6Lookups: `template IN AAAA [ZONES] {
// rcode NOERROR }` answers every AAAA query under the zones (the block's
// without any) with NODATA: --suppress-aaaa. Any other template is lost.
func (t *translator) template(b *blockCtx, d *corefile.Directive) error {
	w := where(t.file, d)
	aaaaOnly := len(d.Args) >= 2 && strings.EqualFold(d.Args[0], "IN") && strings.EqualFold(d.Args[1], "AAAA") &&
		len(d.Options) == 1 && d.Options[0].Name == "rcode" && d.Options[0].String() == "rcode NOERROR"
	if !aaaaOnly {
		t.m.unsupport(w, "the template plugin has no nodecache equivalent: the names it synthesised get the upstreams' answers")
		return nil
	}
	zones := b.zones
	if len(d.Args) > 2 {
		zones = nil
		for _, z := range d.Args[2:] {
			k, err := parseServerKey(z)
			if err != nil {
				return err
			}
			zones = append(zones, k.zone)
		}
	}
	for _, z := range zones {
		t.noAAAA = append(t.noAAAA, item{value: z, from: w})
	}
	return nil
}

// finishAAAA writes --suppress-aaaa: "." alone when a template covered the
// root (it takes every name), else each zone once, as the Corefile named
// them.
func (t *translator) finishAAAA() {
	seen := map[string]bool{}
	var root []item
	for _, it := range t.noAAAA {
		if it.value == "." {
			root = append(root, it)
		}
	}
	if len(root) > 0 {
		froms := make([]string, 0, len(t.noAAAA))
		for _, it := range t.noAAAA {
			if !seen[it.from] {
				seen[it.from] = true
				froms = append(froms, it.from)
			}
		}
		t.m.set("suppress-aaaa", ".", strings.Join(froms, "; ")+" (AAAA answered NOERROR with no records, every name)")
		return
	}
	for _, it := range t.noAAAA {
		z := strings.TrimSuffix(it.value, ".")
		if !seen[z] {
			seen[z] = true
			t.m.add("suppress-aaaa", z, it.from+" (AAAA answered NOERROR with no records)")
		}
	}
}
