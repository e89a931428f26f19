package rewrite

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/server"
	"github.com/nodecache/nodecache/pkg/static"
	"github.com/nodecache/nodecache/pkg/wire"
)

// Local is where a rewritten name is answered before the next resolver:
// the static records, then the cluster zone for names under Domain.
type Local struct {
	Static *static.Records // nil: none
	Zone   server.Zone     // nil: no cluster zone
	Domain string          // the cluster domain, a lowercased FQDN
}

// Resolver answers the names its rules rewrite, in front of next: it asks
// for the target (Local, else next) and writes the asked name back into
// the reply. Other names go to next. The rules are swapped whole by
// SetRules (a config reload).
type Resolver struct {
	rules atomic.Pointer[Rules]
	local Local
	next  server.Resolver
}

var _ server.Resolver = (*Resolver)(nil)

// NewResolver returns rules in front of next.
func NewResolver(rules Rules, local Local, next server.Resolver) *Resolver {
	r := &Resolver{local: local, next: next}
	r.rules.Store(&rules)
	return r
}

// SetRules replaces the rules.
func (r *Resolver) SetRules(rules Rules) { r.rules.Store(&rules) }

// Lookup misses a name a rule rewrites, so that the server's slow path
// (Resolve) answers it, and asks next for the others.
func (r *Resolver) Lookup(q *wire.Query, now time.Time) (*wire.Packed, wire.TTLMode, bool) {
	if rs := *r.rules.Load(); len(rs) > 0 {
		if _, _, ok := rs.Apply(presentation(q)); ok {
			return nil, wire.TTLMode{}, false
		}
	}
	return r.next.Lookup(q, now)
}

func presentation(q *wire.Query) string {
	name, _, err := dns.UnpackDomainName(q.LowerName(), 0)
	if err != nil {
		return "."
	}
	return name
}

// Resolve answers key, through its target when a rule rewrites its name.
func (r *Resolver) Resolve(ctx context.Context, key wire.Key, by time.Time) (wire.Answer, error) {
	rs := *r.rules.Load()
	if len(rs) == 0 { // no rules: no presentation name to build (it allocates)
		return r.next.Resolve(ctx, key, by)
	}
	original := key.PresentationName() // lowercased; the server writes the asker's spelling
	to, rule, ok := rs.Apply(original)
	if !ok {
		return r.next.Resolve(ctx, key, by)
	}
	m, src, err := r.target(ctx, to, key, by)
	if err != nil {
		return wire.Answer{}, err
	}
	rule.Revert(m, original, to)
	p, err := wire.Pack(m)
	if err != nil {
		return wire.Answer{}, fmt.Errorf("packing the rewritten reply for %s: %w", original, err)
	}
	return wire.Answer{Packed: p, Source: src}, nil
}

// target is the reply for name to (key's type, class and flags): from the
// static records, the cluster zone, or next.
func (r *Resolver) target(ctx context.Context, to string, key wire.Key, by time.Time) (*dns.Msg, wire.Source, error) {
	if m, ok := r.local.Static.LookupNameIfAny(to, key.Type); ok {
		return m, wire.SourceLocal, nil
	}
	if r.local.Zone != nil && dns.IsSubDomain(r.local.Domain, to) {
		m, chase := r.zoneAnswer(to, key.Type)
		if chase != "" {
			if err := r.chaseOut(ctx, m, chase, key, by); err != nil {
				return nil, 0, err
			}
		}
		return m, wire.SourceZone, nil
	}
	nkey, err := wire.NewKey(to, key.Type, key.Class, key.DO, key.CD)
	if err != nil {
		return nil, 0, fmt.Errorf("rewriting %s to %s: %w", key.PresentationName(), to, err)
	}
	res, err := r.next.Resolve(ctx, nkey, by)
	if err != nil {
		return nil, 0, err
	}
	m, err := res.Packed.Msg()
	if err != nil {
		return nil, 0, err
	}
	applyTTLMode(m, res.Mode)
	return m, res.Source, nil
}

// zoneAnswer is the cluster zone's reply for name, with records copied
// (the zone's are shared and Revert renames them), and the name out of
// the zone its CNAME ends at, if any (an ExternalName service).
func (r *Resolver) zoneAnswer(name string, qtype uint16) (*dns.Msg, string) {
	za := r.local.Zone.Lookup(name, qtype)
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Response, m.Authoritative, m.RecursionAvailable = true, za.Rcode != dns.RcodeServerFailure, true
	m.Rcode = za.Rcode
	if za.Rcode == dns.RcodeRefused { // not the zone's after all (a reverse name)
		m.Rcode = dns.RcodeNameError
	}
	m.Answer, m.Ns, m.Extra = za.Answer, za.Ns, za.Extra
	return m.Copy(), za.Chase
}

// chaseOut resolves target, where a zone answer's CNAME leads out of the
// zone, through next and appends its records; the reply takes its rcode
// (RFC 6604), as the server does for a query of the zone.
func (r *Resolver) chaseOut(ctx context.Context, m *dns.Msg, target string, key wire.Key, by time.Time) error {
	ck, err := wire.NewKey(target, key.Type, key.Class, key.DO, key.CD)
	if err != nil {
		return fmt.Errorf("chasing %s: %w", target, err)
	}
	res, err := r.next.Resolve(ctx, ck, by)
	if err != nil {
		return err
	}
	cm, err := res.Packed.Msg()
	if err != nil {
		return err
	}
	applyTTLMode(cm, res.Mode)
	m.Answer = append(m.Answer, cm.Answer...)
	m.Rcode = cm.Rcode
	return nil
}

// applyTTLMode writes TTLs as wire.Packed.AppendReply would.
func applyTTLMode(m *dns.Msg, mode wire.TTLMode) {
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			h := rr.Header()
			if h.Rrtype == dns.TypeOPT {
				continue
			}
			if mode.Fixed != 0 {
				h.Ttl = mode.Fixed
			} else {
				h.Ttl -= min(h.Ttl, mode.Elapsed)
			}
		}
	}
}
