package kubezone

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// PodsMode says which pod records the zone answers. The zero value is
// PodsInsecure.
type PodsMode string

// Pod record modes (Config.Pods).
const (
	// PodsInsecure answers <a-b-c-d>.<ns>.pod.<zone> for any IP as long as
	// the namespace exists (kubeadm's default, "pods insecure" in CoreDNS).
	PodsInsecure PodsMode = "insecure"
	// PodsVerified answers only for IPs of pods that exist in that
	// namespace. It needs a cluster-wide pod watch (see doc.go for the cost).
	PodsVerified PodsMode = "verified"
	// PodsDisabled answers NXDOMAIN for every pod name.
	PodsDisabled PodsMode = "disabled"
)

// ParsePodsMode returns the mode named s; "" is the zero value (insecure).
func ParsePodsMode(s string) (PodsMode, error) {
	m := PodsMode(s)
	return m, m.Validate()
}

// Validate reports an unknown mode, naming the valid ones.
func (m PodsMode) Validate() error {
	switch m {
	case "", PodsInsecure, PodsVerified, PodsDisabled:
		return nil
	}
	return fmt.Errorf("pods mode %q: want insecure, verified or disabled", string(m))
}

// Sources reported by Zone.Source.
const (
	SourceNone     = "none"
	SourceSnapshot = "snapshot"
	SourceAPI      = "api"
	SourceFixture  = "fixture" // Clients.Fixture: objects of a file, not an API server
)

// Defaults applied by Validate to zero fields.
const (
	DefaultDomain           = "cluster.local."
	DefaultTTL              = 5 * time.Second
	DefaultNegativeTTL      = 5 * time.Second
	DefaultSnapshotInterval = 10 * time.Second
	DefaultSnapshotMaxAge   = time.Hour
	DefaultRelistSpread     = 30 * time.Second
)

// Config configures a Zone. The zero value is usable after Validate, which
// fills in the documented defaults.
type Config struct {
	// Domain is the cluster domain, an FQDN. Zero means "cluster.local.".
	// It is lowercased and given a trailing dot.
	Domain string
	// TTL of positive answers. Zero means 5s. Must be whole seconds.
	TTL time.Duration
	// NegativeTTL is the SOA minimum and SOA TTL carried by negative
	// answers. Zero means 5s.
	NegativeTTL time.Duration
	// Pods is the pod record mode: PodsInsecure (zero value), PodsVerified
	// or PodsDisabled.
	Pods PodsMode
	// NodeName selects the pods watched for PodByIP (field selector
	// spec.nodeName). Empty means no node-local pods are watched.
	NodeName string
	// LocalIPs are the agent's own addresses, served as glue for the NS
	// record at the apex and as ns.dns.<zone>. May be empty.
	LocalIPs []netip.Addr
	// SnapshotPath is where the zone's source objects are persisted so that
	// a restart without an API server can still answer. Empty disables
	// snapshots.
	SnapshotPath string
	// SnapshotInterval is the minimum time between two snapshot writes.
	// Zero means 10s.
	SnapshotInterval time.Duration
	// SnapshotMaxAge is how old a snapshot may be and still answer: an
	// older one is not loaded, and one that grows older while the API server
	// stays away stops answering (SERVFAIL for cluster names, rather than
	// NXDOMAIN for services created since). Zero means 1h.
	SnapshotMaxAge time.Duration
	// RelistSpread is the window over which relists are spread: after the
	// API server restarts (or a watch expires), each informer waits a random
	// delay below it before relisting, so that the agents of a cluster do
	// not all relist at once; the zone answers from what it holds
	// meanwhile. An informer's first list does not wait. Zero means 30s;
	// negative means relists go out at once.
	RelistSpread time.Duration
}

// Validate fills in defaults and checks the configuration.
func (c *Config) Validate() error {
	if c.Domain == "" {
		c.Domain = DefaultDomain
	}
	c.Domain = strings.ToLower(dns.Fqdn(c.Domain))
	if _, ok := dns.IsDomainName(c.Domain); !ok || c.Domain == "." {
		return fmt.Errorf("validating domain %q: not a valid domain name", c.Domain)
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.NegativeTTL == 0 {
		c.NegativeTTL = DefaultNegativeTTL
	}
	if c.SnapshotInterval == 0 {
		c.SnapshotInterval = DefaultSnapshotInterval
	}
	if c.SnapshotMaxAge == 0 {
		c.SnapshotMaxAge = DefaultSnapshotMaxAge
	}
	if c.RelistSpread == 0 {
		c.RelistSpread = DefaultRelistSpread
	}
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ttl", c.TTL}, {"negative ttl", c.NegativeTTL}} {
		if d.v < time.Second || d.v%time.Second != 0 || d.v > 24*time.Hour {
			errs = append(errs, fmt.Errorf("validating %s %s: want whole seconds between 1s and 24h", d.name, d.v))
		}
	}
	if c.SnapshotInterval < 0 {
		errs = append(errs, fmt.Errorf("validating snapshot interval %s: negative", c.SnapshotInterval))
	}
	if c.SnapshotMaxAge < 0 {
		errs = append(errs, fmt.Errorf("validating snapshot maximum age %s: negative", c.SnapshotMaxAge))
	}
	if err := c.Pods.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("validating %w", err))
	} else if c.Pods == "" {
		c.Pods = PodsInsecure
	}
	for _, ip := range c.LocalIPs {
		if !ip.IsValid() {
			errs = append(errs, errors.New("validating local IPs: invalid address"))
		}
	}
	return errors.Join(errs...)
}

func (c *Config) ttlSeconds() uint32    { return uint32(c.TTL / time.Second) }
func (c *Config) negTTLSeconds() uint32 { return uint32(c.NegativeTTL / time.Second) }
