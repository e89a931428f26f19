package agent

import (
	"crypto/tls"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/nodecache/nodecache/pkg/kubezone"
	"github.com/nodecache/nodecache/pkg/upstream"
)

// TestLogValuesAreWords checks that the start line and the "zone at exit"
// line log addresses, names and counts, not Go struct dumps (they printed
// upstreams="[{Addr:10.255.255.53:53 Up:true ...}]" and
// stats="{Namespaces:2 ...}").
func TestLogValuesAreWords(t *testing.T) {
	tlsUp := netip.MustParseAddrPort("9.9.9.9:853")
	fcfg := upstream.Config{Servers: []netip.AddrPort{netip.MustParseAddrPort("10.255.255.53:53"), tlsUp},
		TLS: map[netip.AddrPort]*tls.Config{tlsUp: {ServerName: "dns.quad9.net"}}}
	got := fmt.Sprintln(servingAttrs([]netip.AddrPort{netip.MustParseAddrPort("169.254.20.10:53")}, fcfg, &Config{Fixture: "zone.yaml"}, true)...)
	for _, want := range []string{"169.254.20.10:53", "10.255.255.53:53,tls://9.9.9.9:853#dns.quad9.net", "zone_source fixture fixture zone.yaml"} {
		if !strings.Contains(got, want) {
			t.Errorf("start line values %q: want %q in them", got, want)
		}
	}
	got = fmt.Sprintln(zoneAttrs(kubezone.Stats{Services: 10, Names: 62, Synced: true, Source: kubezone.SourceFixture})...)
	for _, want := range []string{"source fixture", "services 10", "names 62", "synced true"} {
		if !strings.Contains(got, want) {
			t.Errorf("zone at exit values %q: want %q in them", got, want)
		}
	}
	if strings.ContainsAny(got, "{}") {
		t.Errorf("zone at exit values %q: a struct dump", got)
	}
}
