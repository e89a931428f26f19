package kubezone

import (
	"sort"
	"strings"

	"github.com/miekg/dns"
)

// Record is one record of the zone, for `nodecache zone list/show`.
type Record struct {
	Name string // owner name, lowercased FQDN
	Type string // A, AAAA, SRV, PTR, CNAME, TXT, NS
	TTL  uint32
	Data string // presentation form of the RDATA
}

// List returns the records of namespace ns (its service, endpoint, SRV
// names, verified pod names, and PTRs pointing into it), or of the whole
// zone when ns is empty, sorted by name and type. It walks the whole
// table: for operators, not for the query path.
func (z *Zone) List(ns string) []Record {
	var svcSuffix, podSuffix string
	if ns != "" {
		svcSuffix = "." + ns + ".svc." + z.cfg.Domain
		podSuffix = "." + ns + ".pod." + z.cfg.Domain
	}
	under := func(name string) bool {
		return ns == "" || strings.HasSuffix(name, svcSuffix) || strings.HasSuffix(name, podSuffix)
	}
	var out []Record
	z.tab.each(func(name string, n *node) {
		for _, rr := range n.answers() {
			if ns != "" {
				ptr, isPTR := rr.(*dns.PTR)
				if (isPTR && !under(ptr.Ptr)) || (!isPTR && !under(name)) {
					continue
				}
			}
			out = append(out, toRecord(rr))
		}
		if n.kind == kindApex && ns == "" {
			out = append(out, toRecord(z.meta.Load().soaRR[0]))
		}
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		if out[i].Type != out[j].Type {
			return out[i].Type < out[j].Type
		}
		return out[i].Data < out[j].Data
	})
	return out
}

func toRecord(rr dns.RR) Record {
	h := rr.Header()
	return Record{Name: h.Name, Type: dns.TypeToString[h.Rrtype], TTL: h.Ttl,
		Data: strings.TrimPrefix(rr.String(), h.String())}
}
