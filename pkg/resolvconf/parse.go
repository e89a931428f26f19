package resolvconf

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// MaxNdots is the cap glibc and musl put on ndots (RES_MAXNDOTS).
const MaxNdots = 15

// Nameserver is one nameserver line.
type Nameserver struct {
	Addr string // the line's second field, as written
	Line int    // 1-based line number
}

// Conf is what a resolv.conf says. The zero value is an empty file, except
// that Ndots of an empty file is 1: use Parse.
type Conf struct {
	Nameservers []Nameserver // every nameserver line, in order
	// Search is the last search line's domains with any trailing dot
	// removed: kubelet's reading, the list a ClusterFirst pod inherits.
	Search []string
	// Domain is the last domain line's domain, "" when none.
	Domain string
	// domainLast is set when a domain line comes after the last search
	// line: a stub resolver then searches Domain alone.
	domainLast bool
	// Ndots is options ndots: 1 when absent, capped at 15; a value that is
	// not a number is ignored, as glibc does.
	Ndots int
}

// Servers returns the nameserver addresses, in order.
func (c Conf) Servers() []string {
	out := make([]string, len(c.Nameservers))
	for i, n := range c.Nameservers {
		out[i] = n.Addr
	}
	return out
}

// StubSearch is the search list a glibc or musl stub resolver uses: the
// last search or domain line wins.
func (c Conf) StubSearch() []string {
	if c.domainLast {
		return []string{c.Domain}
	}
	return c.Search
}

// ReadFile parses the resolv.conf at path.
func ReadFile(path string) (Conf, error) {
	f, err := os.Open(path)
	if err != nil {
		return Conf{}, err
	}
	defer f.Close()
	c, err := Parse(f)
	if err != nil {
		return Conf{}, fmt.Errorf("reading %s: %w", path, err)
	}
	return c, nil
}

// Parse reads a resolv.conf. Lines starting with # or ; are comments;
// unknown keywords and a nameserver line without an address are skipped.
// The error is only a read error.
func Parse(r io.Reader) (Conf, error) {
	c := Conf{Ndots: 1}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) > 1 {
				c.Nameservers = append(c.Nameservers, Nameserver{Addr: f[1], Line: line})
			}
		case "search":
			c.Search = make([]string, 0, len(f)-1)
			for _, d := range f[1:] {
				c.Search = append(c.Search, strings.TrimSuffix(d, "."))
			}
			c.domainLast = false
		case "domain":
			if len(f) > 1 {
				c.Domain, c.domainLast = strings.TrimSuffix(f[1], "."), true
			}
		case "options":
			for _, opt := range f[1:] {
				if v, ok := strings.CutPrefix(opt, "ndots:"); ok {
					if n, err := strconv.Atoi(v); err == nil && n >= 0 {
						c.Ndots = min(n, MaxNdots)
					}
				}
			}
		}
	}
	return c, sc.Err()
}
