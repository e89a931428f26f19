package migrate

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/corefile"
	"github.com/nodecache/nodecache/pkg/upstream"
)

// forwardTargets are the TO arguments of a forward directive, by kind.
type forwardTargets struct {
	servers []string // IP[:port] and tls://IP[:port]#NAME, in order, validated
	paths   []string // resolv.conf files
	cluster bool     // node-local-dns's __PILLAR__CLUSTER__DNS__
}

// parseForwardTargets sorts the TO arguments; serverName is the
// forward's tls_servername ("" verifies the IP).
func parseForwardTargets(args []string, serverName string) (forwardTargets, error) {
	var t forwardTargets
	for _, to := range args {
		if strings.ContainsAny(to, ",#") {
			return t, fmt.Errorf("%q: a forward target is one server or file; write several as separate words", to)
		}
		lower := strings.ToLower(to)
		switch {
		case to == clusterDNSPillar:
			t.cluster = true
		case strings.HasPrefix(lower, "tls://"):
			spec := to[len("tls://"):]
			if serverName != "" {
				spec += "#" + serverName
			}
			if _, err := upstream.ParseServers("tls://" + spec); err != nil {
				return t, fmt.Errorf("%q: %w", to, err)
			}
			t.servers = append(t.servers, "tls://"+spec)
		case strings.Contains(lower, "://") && !strings.HasPrefix(lower, "dns://"):
			return t, fmt.Errorf("%q: forward takes dns:// and tls:// servers", to)
		case strings.Contains(strings.TrimPrefix(lower, "dns://"), "/"):
			t.paths = append(t.paths, to)
		default:
			ip := to[len(to)-len(strings.TrimPrefix(lower, "dns://")):]
			if _, err := upstream.ParseServers(ip); err != nil {
				return t, err
			}
			t.servers = append(t.servers, ip)
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
	serverName := ""
	if o := d.Option("tls_servername"); o != nil && len(o.Args) == 1 {
		serverName = o.Args[0]
		if err := checkServerName(serverName); err != nil {
			return fmt.Errorf("line %d: tls_servername: %w", o.Line, err)
		}
	}
	to, err := parseForwardTargets(d.Args[1:], serverName)
	if err != nil {
		return err
	}
	for _, z := range zones {
		switch {
		case to.cluster || z == t.clusterDomain || (isReverseZone(z) && (b.hasK8 || t.isClusterDNS(to.servers))):
			t.m.note(w, "nodecache answers the cluster zone itself from the API server, and sends the names it does not own to the default upstreams; this forward's options do not apply")
			continue
		case z == ".":
			t.rootForward(w, to)
		default:
			t.stubForward(b, z, w, to)
		}
		if err := t.forwardOptions(z, d); err != nil {
			return err
		}
	}
	return nil
}

func (t *translator) rootForward(w string, to forwardTargets) {
	if len(to.paths) > 0 && len(to.servers) > 0 || len(to.paths) > 1 {
		t.m.unsupport(w, "nodecache takes either a resolv.conf or a list of servers as its upstream: only the first resolv.conf is used")
	}
	switch {
	case len(to.paths) > 0:
		t.m.set("upstream", to.paths[0], w)
	case len(to.servers) > 0:
		t.m.set("upstream", strings.Join(to.servers, ","), w)
	}
}

func (t *translator) stubForward(b *blockCtx, zone, w string, to forwardTargets) {
	if dns.IsSubDomain(t.clusterDomain, zone) {
		t.m.note(w, fmt.Sprintf("names under %s go to this stub domain's servers, not to the cluster zone: the most specific zone wins, in nodecache as in CoreDNS",
			strings.TrimSuffix(zone, ".")))
	}
	if len(to.paths) > 0 {
		t.m.unsupport(w, fmt.Sprintf("a stub domain takes servers, not a resolv.conf: names under %s go to the default upstreams", zone))
	}
	if len(to.servers) == 0 {
		return
	}
	t.stubs[zone] = &stubOut{block: b, servers: strings.Join(to.servers, ","), from: []string{w}}
	t.stubOrder = append(t.stubOrder, zone)
}

// isClusterDNS reports whether servers are the cluster DNS's, as a
// node-local cache that names them by IP forwards its cluster domain.
func (t *translator) isClusterDNS(servers []string) bool {
	return len(t.clusterDNS) > 0 && slices.Equal(servers, t.clusterDNS)
}

// checkServerName refuses a tls_servername that is not a host name
// (letters, digits, -, _ and dots): it is written after # in an upstream
// list, where a , or a space would start another server.
func checkServerName(n string) error {
	if _, ok := dns.IsDomainName(n); !ok || strings.Trim(n, ".") == "" {
		return fmt.Errorf("%q is not a host name", n)
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return fmt.Errorf("%q is not a host name", n)
		}
	}
	return nil
}

// stubOut is a --stub-domain being written: servers, options, and the
// directives they came from.
type stubOut struct {
	block   *blockCtx
	servers string
	opts    []string
	from    []string
}

func (s *stubOut) option(opt, from string) {
	s.opts = append(s.opts, opt)
	s.from = append(s.from, from)
}

// forwardOptions translates the options of a forward for zone.
func (t *translator) forwardOptions(zone string, d *corefile.Directive) error {
	root := zone == "."
	stub := t.stubs[zone]
	for _, o := range d.Options {
		w := where(t.file, o)
		switch o.Name {
		case "policy", "max_concurrent":
			key := map[string]string{"policy": "upstream-policy", "max_concurrent": "max-upstream-inflight"}[o.Name]
			opt := map[string]string{"policy": "policy", "max_concurrent": "max-concurrent"}[o.Name]
			if err := checkForwardValue(o); err != nil {
				return err
			}
			switch {
			case root && o.Name == "max_concurrent":
				t.m.set(key, o.Args[0], w+" (nodecache's cap covers stub domains too)")
			case root:
				t.m.set(key, o.Args[0], w)
			case stub != nil:
				stub.option(opt+"="+o.Args[0], w)
			}
		case "force_tcp":
			if root {
				t.m.set("upstream-force-tcp", "true", w)
			} else if stub != nil {
				stub.option("force-tcp", w)
			}
		case "prefer_udp":
			switch {
			case d.Option("force_tcp") != nil:
				t.m.note(w, "force_tcp wins over prefer_udp, in nodecache as in CoreDNS")
			case root:
				t.m.set("upstream-force-tcp", "false", w+" (UDP first whatever the client used, TCP after a truncated reply)")
			default:
				t.m.note(w, "a stub domain's servers are asked over UDP first, and over TCP after a truncated reply")
			}
		case "expire":
			t.m.note(w, "nodecache closes idle upstream TCP connections after 10s")
		case "max_fails", "health_check":
			t.m.note(w, "nodecache marks a server down after 3 failed tries in a row and probes it (from 1s, backing off); down servers are still tried last")
		case "tls_servername":
			t.m.note(w, "written as #NAME after each tls:// server")
		case "tls":
			t.forwardTLS(w, o.Args)
		case "except":
			t.m.unsupport(w, fmt.Sprintf("names under %s go to this forward's servers too", strings.Join(o.Args, " ")))
		default:
			t.m.unsupport(w, fmt.Sprintf("forward option %s has no nodecache equivalent", o.Name))
		}
	}
	return nil
}

// checkForwardValue refuses what CoreDNS refuses in policy and
// max_concurrent: one value, a known policy, a positive count.
func checkForwardValue(o *corefile.Directive) error {
	if len(o.Args) != 1 {
		return fmt.Errorf("line %d: %s wants one value", o.Line, o.Name)
	}
	v := o.Args[0]
	if o.Name == "policy" && v != "random" && v != "round_robin" && v != "sequential" {
		return fmt.Errorf("line %d: policy %q: want random, round_robin or sequential", o.Line, v)
	}
	if n, err := strconv.Atoi(v); o.Name == "max_concurrent" && (err != nil || n < 1) {
		return fmt.Errorf("line %d: max_concurrent %q: want a positive number", o.Line, v)
	}
	return nil
}

// forwardTLS translates `tls [CERT KEY] [CA]`: the CA verifies the
// servers (--upstream-tls-ca, for every DNS over TLS upstream); a client
// certificate is not reproduced.
func (t *translator) forwardTLS(w string, args []string) {
	switch len(args) {
	case 0:
		t.m.note(w, "the system's CAs verify DNS over TLS servers")
	case 1, 3:
		t.m.set("upstream-tls-ca", args[len(args)-1], w+" (mount it into the nodecache pod at this path)")
	}
	if len(args) >= 2 {
		t.m.unsupport(w, "nodecache presents no client certificate to DNS over TLS servers: one that requires it refuses the connection")
	}
}
