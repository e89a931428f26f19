package agent

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/nodecache/nodecache/pkg/upstream"
)

// dotPort is the DNS over TLS port (RFC 7858).
const dotPort = 853

// upstreamTLS collects the DNS over TLS servers of the upstream and stub
// domain lists, with the CAs that verify them (nil: the system's).
type upstreamTLS struct {
	roots   *x509.CertPool
	servers map[netip.AddrPort]*tls.Config
}

func newUpstreamTLS(caFile string) (*upstreamTLS, error) {
	u := &upstreamTLS{servers: map[netip.AddrPort]*tls.Config{}}
	if caFile == "" {
		return u, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--upstream-tls-ca: %w", err)
	}
	u.roots = x509.NewCertPool()
	if !u.roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--upstream-tls-ca %s: no PEM certificate in it", caFile)
	}
	return u, nil
}

// parseList parses "IP[:port],tls://IP[:port][#NAME],..." (or a
// resolv.conf path) in order, recording the TLS ones.
func (u *upstreamTLS) parseList(list string) ([]netip.AddrPort, error) {
	if !strings.Contains(list, "tls://") {
		return upstream.ParseServers(list)
	}
	var out []netip.AddrPort
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		rest, isTLS := strings.CutPrefix(item, "tls://")
		if !isTLS {
			s, err := upstream.ParseServers(item)
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
			continue
		}
		ap, err := u.parseTLS(rest)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		out = append(out, ap)
	}
	return out, nil
}

// parseTLS parses "IP[:port][#NAME]": the port defaults to 853, the name
// to verify to the IP.
func (u *upstreamTLS) parseTLS(s string) (netip.AddrPort, error) {
	hostport, name, _ := strings.Cut(s, "#")
	var ap netip.AddrPort
	if ip, err := netip.ParseAddr(strings.Trim(hostport, "[]")); err == nil {
		ap = netip.AddrPortFrom(ip.Unmap(), dotPort)
	} else if ap, err = netip.ParseAddrPort(hostport); err != nil {
		return ap, errors.New("want tls://IP[:port][#SERVER-NAME], e.g. tls://9.9.9.9#dns.quad9.net")
	}
	if name == "" {
		name = ap.Addr().String()
	}
	u.servers[ap] = &tls.Config{ServerName: name, RootCAs: u.roots, MinVersion: tls.VersionTLS12}
	return ap, nil
}

// ParseTLSUpstream checks a DNS over TLS server as --upstream and
// --stub-domain take it after tls://: "IP[:port][#NAME]", and returns its
// address (port 853 by default).
func ParseTLSUpstream(s string) (netip.AddrPort, error) {
	return (&upstreamTLS{servers: map[netip.AddrPort]*tls.Config{}}).parseTLS(s)
}
