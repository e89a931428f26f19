package migrate

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/corefile"
)

// hosts translates `hosts [FILE [ZONES...]] { entries and options }` into
// static records.
func (t *translator) hosts(b *blockCtx, d *corefile.Directive) error {
	w := where(t.file, d)
	file := "/etc/hosts"
	if len(d.Args) > 0 {
		file = d.Args[0]
	} else {
		t.m.note(w, "CoreDNS read /etc/hosts in its own container; nodecache reads the file at that path in its pod (the node's for a host-network pod)")
	}
	t.m.add("static-file", file, w+" (mount it into the nodecache pod at this path)")
	if len(d.Args) > 1 {
		t.m.note(w, "static records answer every name they list, not only those under "+strings.Join(d.Args[1:], " "))
	}
	b.hosts = true
	fallthroughSeen := false
	for _, o := range d.Options {
		ow := where(t.file, o)
		if _, err := netip.ParseAddr(o.Name); err == nil {
			if len(o.Args) == 0 {
				return fmt.Errorf("line %d: %s has no names", o.Line, o.Name)
			}
			t.hostsEntry(o, ow)
			continue
		}
		switch o.Name {
		case "ttl":
			ttl, err := seconds(strings.Join(o.Args, " "))
			if err != nil || ttl == 0 {
				return fmt.Errorf("line %d: ttl wants a number of seconds (at least 1)", o.Line)
			}
			b.hostsTTL, b.hostsTTLFrom = ttl, ow
		case "no_reverse":
			t.m.set("static-no-reverse", "true", ow)
		case "reload":
			t.m.note(ow, "nodecache re-reads a static file within 5s of a change")
		case "fallthrough":
			fallthroughSeen = true
			if len(o.Args) > 0 {
				t.m.note(ow, "names not listed fall through to the upstreams in every zone, not only "+strings.Join(o.Args, " "))
			}
		default:
			t.m.unsupport(ow, fmt.Sprintf("hosts option %s is not reproduced", o.Name))
		}
	}
	if !fallthroughSeen {
		t.m.unsupport(w, fmt.Sprintf("without fallthrough CoreDNS answers names under %s that are not listed with an error; nodecache forwards them",
			strings.Join(b.zones, " ")))
	}
	return nil
}

func (t *translator) hostsEntry(o *corefile.Directive, from string) {
	for _, n := range o.Args {
		if dns.IsSubDomain(t.clusterDomain, dns.Fqdn(strings.ToLower(n))) {
			t.m.unsupport(from, fmt.Sprintf("%s is in the cluster domain, which the cluster zone answers before static records", n))
			return
		}
	}
	t.m.add("static-record", o.String(), from)
}

// rewrite translates `rewrite [stop] name [exact|suffix] FROM TO [answer auto]`.
func (t *translator) rewrite(_ *blockCtx, d *corefile.Directive) error {
	w := where(t.file, d)
	args := d.Args
	if len(args) > 0 && (args[0] == "stop" || args[0] == "continue") {
		if args[0] == "continue" {
			t.m.unsupport(w, "rewrite continue: only the first rule that matches a name applies")
			return nil
		}
		args = args[1:]
	}
	if len(args) == 0 || args[0] != "name" {
		t.m.unsupport(w, "only rewrite name (exact or suffix) is reproduced: this rewrite is lost")
		return nil
	}
	args = args[1:]
	kind := "exact"
	if len(args) > 0 && slices.Contains([]string{"exact", "suffix", "prefix", "substring", "regex"}, args[0]) {
		kind, args = args[0], args[1:]
	}
	auto := len(args) == 4 && args[2] == "answer" && args[3] == "auto"
	switch {
	case kind != "exact" && kind != "suffix":
		t.m.unsupport(w, fmt.Sprintf("rewrite name %s is not reproduced (exact and suffix are): pods get the answer for the name they asked for", kind))
		return nil
	case len(args) != 2 && !auto, len(d.Options) > 0:
		t.m.unsupport(w, "rewrite answer options are not reproduced: this rewrite is lost")
		return nil
	}
	from := strings.ToLower(args[0])
	if dns.IsSubDomain(t.clusterDomain, dns.Fqdn(strings.TrimSuffix(from, "."))) || (kind == "suffix" && strings.HasSuffix(dns.Fqdn(from), "."+t.clusterDomain)) {
		t.m.unsupport(w, "names in the cluster domain are answered by the cluster zone before rewrites: this rewrite is lost")
		return nil
	}
	spec := kind + " " + args[0] + " " + args[1]
	if auto {
		spec += " answer auto"
	}
	t.m.add("rewrite-name", spec, w)
	return nil
}
