package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// Files of a kube-dns ConfigMap mounted as a directory.
const (
	kubeDNSStubDomainsFile = "stubDomains"
	kubeDNSUpstreamsFile   = "upstreamNameservers"
)

// LoadKubeDNSConfig reads a kube-dns style ConfigMap mounted as a directory:
// the file stubDomains holds a JSON object domain -> ["IP[:port]", ...] and
// upstreamNameservers a JSON array of "IP[:port]". A missing or blank file
// yields no entries for that part (both missing is not an error); stubs is
// never nil on success, so callers may add to it.
func LoadKubeDNSConfig(dir string) (stubs map[string][]netip.AddrPort, upstreams []netip.AddrPort, err error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, nil, fmt.Errorf("reading kube-dns config dir: %w", err)
	} else if !fi.IsDir() {
		return nil, nil, fmt.Errorf("reading kube-dns config dir: %s is not a directory", dir)
	}
	var rawStubs map[string][]string
	if err := readJSONFile(filepath.Join(dir, kubeDNSStubDomainsFile), &rawStubs); err != nil {
		return nil, nil, err
	}
	var rawUpstreams []string
	if err := readJSONFile(filepath.Join(dir, kubeDNSUpstreamsFile), &rawUpstreams); err != nil {
		return nil, nil, err
	}
	stubs = make(map[string][]netip.AddrPort, len(rawStubs))
	for name, list := range rawStubs {
		domain, err := canonicalDomain(name)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: stub domain %q: %w", kubeDNSStubDomainsFile, name, err)
		}
		servers, err := parseAddrList(list)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: stub domain %q: %w", kubeDNSStubDomainsFile, name, err)
		}
		stubs[domain] = append(stubs[domain], servers...)
	}
	if upstreams, err = parseAddrList(rawUpstreams); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", kubeDNSUpstreamsFile, err)
	}
	return stubs, upstreams, nil
}

func parseAddrList(list []string) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for _, s := range list {
		ap, err := parseAddrPort(strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		out = append(out, ap)
	}
	return out, nil
}

// readJSONFile decodes path into v; a missing or blank file leaves v alone.
func readJSONFile(path string, v any) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("parsing %s as JSON: %w", path, err)
	}
	return nil
}
