package migrate

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

func dedupe(in []string) []string {
	var out []string
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
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
