package agent

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// ipListFlag is a comma-separated list of IP addresses.
type ipListFlag struct{ ips *[]netip.Addr }

func (f ipListFlag) String() string {
	if f.ips == nil {
		return ""
	}
	var s []string
	for _, ip := range *f.ips {
		s = append(s, ip.String())
	}
	return strings.Join(s, ",")
}

func (f ipListFlag) Set(v string) error {
	ips, err := ParseIPList(v)
	if err != nil {
		return err
	}
	*f.ips = ips
	return nil
}

// ParseIPList parses a comma-separated list of IP addresses, as --local-ip
// takes it.
func ParseIPList(v string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		ip, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP address", part)
		}
		out = append(out, ip.Unmap())
	}
	if len(out) == 0 {
		return nil, errors.New("empty IP list")
	}
	return out, nil
}

// commaListFlag is a comma-separated list of words.
type commaListFlag struct{ words *[]string }

func (f commaListFlag) String() string {
	if f.words == nil {
		return ""
	}
	return strings.Join(*f.words, ",")
}

func (f commaListFlag) Set(v string) error {
	*f.words = nil
	for _, w := range strings.Split(v, ",") {
		if w = strings.TrimSpace(w); w != "" {
			*f.words = append(*f.words, w)
		}
	}
	return nil
}

// prefixListFlag is a comma-separated list of CIDR prefixes.
type prefixListFlag struct{ prefixes *[]netip.Prefix }

func (f prefixListFlag) String() string {
	if f.prefixes == nil {
		return ""
	}
	s := make([]string, len(*f.prefixes))
	for i, p := range *f.prefixes {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func (f prefixListFlag) Set(v string) error {
	*f.prefixes = nil
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return fmt.Errorf("%q is not a CIDR prefix (e.g. 10.244.0.0/16)", part)
		}
		*f.prefixes = append(*f.prefixes, p)
	}
	return nil
}

// byteSize is a size with an optional unit: 67108864, 64MiB, 64Mi, 64MB, 1GiB.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(v string) error {
	s := strings.TrimSpace(v)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return fmt.Errorf("%q is not a size (examples: 64MiB, 1GiB, 1048576)", v)
	}
	mult := map[string]float64{"": 1, "B": 1,
		"K": 1e3, "KB": 1e3, "Ki": 1 << 10, "KiB": 1 << 10,
		"M": 1e6, "MB": 1e6, "Mi": 1 << 20, "MiB": 1 << 20,
		"G": 1e9, "GB": 1e9, "Gi": 1 << 30, "GiB": 1 << 30}[unit]
	if mult == 0 {
		return fmt.Errorf("%q: unknown unit %q (use B, KiB, MiB, GiB)", v, unit)
	}
	*b = byteSize(f * mult)
	return nil
}

// durationFlag is a time.Duration flag whose error says what a duration is.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return f.d.String()
}

func (f durationFlag) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is not a duration: give a number with a unit, e.g. 10s, 500ms, 1h", v)
	}
	if d < 0 {
		return fmt.Errorf("%q: durations must not be negative", v)
	}
	*f.d = d
	return nil
}

func durationVar(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var(durationFlag{p}, name, usage)
}
