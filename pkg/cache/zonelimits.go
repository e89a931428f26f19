package cache

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// ZoneLimit caps the TTLs of replies for names under one zone, for the
// per-zone cache settings of a Corefile's server blocks. A zero field
// takes the cache-wide cap (Config.MaxTTL, Config.MaxNegativeTTL).
type ZoneLimit struct {
	MaxTTL         time.Duration
	MaxNegativeTTL time.Duration
}

// zoneLimits is an immutable table of per-zone limits, swapped whole.
type zoneLimits struct {
	byWire map[string]limits // zone in lowercased wire form -> its limits
}

// buildZoneLimits checks zones (lowercased or not, qualified or not) and
// fills each one's zero caps from def.
func buildZoneLimits(zones map[string]ZoneLimit, def limits) (*zoneLimits, error) {
	zl := &zoneLimits{byWire: make(map[string]limits, len(zones))}
	names := make([]string, 0, len(zones))
	for z := range zones {
		names = append(names, z)
	}
	sort.Strings(names)
	for _, z := range names {
		lim := zones[z]
		if lim.MaxTTL < 0 || lim.MaxNegativeTTL < 0 {
			return nil, fmt.Errorf("cache config: zone %s: TTL caps must not be negative", z)
		}
		fqdn := dns.Fqdn(strings.ToLower(z))
		buf := make([]byte, 256)
		n, err := dns.PackDomainName(fqdn, buf, 0, nil, false)
		if err != nil {
			return nil, fmt.Errorf("cache config: zone %q is not a domain name: %w", z, err)
		}
		l := def
		if lim.MaxTTL > 0 {
			l.maxTTL = lim.MaxTTL
		}
		if lim.MaxNegativeTTL > 0 {
			l.maxNegativeTTL = lim.MaxNegativeTTL
		}
		zl.byWire[string(buf[:n])] = l
	}
	return zl, nil
}

// forName returns the limits for a lowercased wire-form name: those of
// the longest zone it is under, else def. It does not allocate.
func (zl *zoneLimits) forName(name string, def limits) limits {
	if zl == nil || len(zl.byWire) == 0 {
		return def
	}
	for off := 0; off < len(name); off += int(name[off]) + 1 {
		if l, ok := zl.byWire[name[off:]]; ok {
			return l
		}
		if name[off] == 0 {
			break
		}
	}
	return def
}

// zoneLimitsPtr holds the live table.
type zoneLimitsPtr = atomic.Pointer[zoneLimits]

// SetZoneLimits replaces the per-zone TTL caps at once; entries already
// cached keep the TTL they were stored with. On error nothing changes.
func (c *Cache) SetZoneLimits(zones map[string]ZoneLimit) error {
	zl, err := buildZoneLimits(zones, c.lim)
	if err != nil {
		return err
	}
	c.zoneLim.Store(zl)
	return nil
}

// limitsFor returns the TTL caps that apply to a key's name.
func (c *Cache) limitsFor(name string) limits {
	return c.zoneLim.Load().forName(name, c.lim)
}
