package agent

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/kubezone"
	"github.com/nodecache/nodecache/pkg/logkey"
	"github.com/nodecache/nodecache/pkg/rewrite"
	"github.com/nodecache/nodecache/pkg/static"
	"github.com/nodecache/nodecache/pkg/wire"
)

// localAnswers are what the agent answers before the cache: static
// records, and name rewrites (whose targets may be static, in the cluster
// zone or upstream). Either may be absent. The rules are swapped whole
// when the config is reloaded.
type localAnswers struct {
	static *static.Records // nil: none
	rules  atomic.Pointer[rewrite.Rules]
	zone   *kubezone.Zone // nil without a zone source
	domain string         // the cluster domain, lowercased FQDN
}

func (l *localAnswers) rewriteRules() rewrite.Rules {
	if l == nil {
		return nil
	}
	if p := l.rules.Load(); p != nil {
		return *p
	}
	return nil
}

// lookup answers q on the fast path from the static records. rewritten
// reports a name a rewrite rule takes, which the slow path answers.
func (l *localAnswers) lookup(q *wire.Query) (p *wire.Packed, rewritten bool) {
	if l == nil {
		return nil, false
	}
	if l.static != nil {
		if p, ok := l.static.Lookup(q); ok {
			return p, false
		}
	}
	if rs := l.rewriteRules(); len(rs) > 0 {
		_, _, ok := rs.Apply(keyPresentation(q))
		return nil, ok
	}
	return nil, false
}

func keyPresentation(q *wire.Query) string {
	name, _, err := dns.UnpackDomainName(q.LowerName(), 0)
	if err != nil {
		return "."
	}
	return name
}

// resolveRewritten answers key, whose name a rule rewrites: it asks the
// target (static records, the cluster zone, or the cache) and writes the
// asked name back into the reply.
func (l *localAnswers) resolveRewritten(ctx context.Context, a resolverAdapter, key wire.Key, by time.Time) (wire.Answer, bool, error) {
	original := key.PresentationName() // lowercased; the server writes the asker's spelling
	to, rule, ok := l.rewriteRules().Apply(original)
	if !ok {
		return wire.Answer{}, false, nil
	}
	qtype := key.Type
	src := wire.SourceLocal
	m, ok := l.static.LookupNameIfAny(to, qtype)
	if !ok && l.zone != nil && dns.IsSubDomain(l.domain, to) {
		var chase string
		m, chase = l.zoneAnswer(to, qtype)
		ok, src = true, wire.SourceZone
		if chase != "" {
			if err := chaseOut(ctx, a, m, chase, key, by); err != nil {
				return wire.Answer{}, true, err
			}
		}
	}
	if !ok {
		nkey, err := wire.NewKey(to, qtype, key.Class, key.DO, key.CD)
		if err != nil {
			return wire.Answer{}, true, fmt.Errorf("rewriting %s to %s: %w", original, to, err)
		}
		res, err := a.Resolve(ctx, nkey, by)
		if err != nil {
			return wire.Answer{}, true, err
		}
		if m, err = res.Packed.Msg(); err != nil {
			return wire.Answer{}, true, err
		}
		applyTTLMode(m, res.Mode)
		src = res.Source
	}
	rule.Revert(m, original, to)
	p, err := wire.Pack(m)
	if err != nil {
		return wire.Answer{}, true, fmt.Errorf("packing the rewritten reply for %s: %w", original, err)
	}
	return wire.Answer{Packed: p, Source: src}, true, nil
}

// zoneAnswer is the cluster zone's reply for name, with records copied
// (the zone's are shared and Revert renames them), and the name out of
// the zone its CNAME ends at, if any (an ExternalName service).
func (l *localAnswers) zoneAnswer(name string, qtype uint16) (*dns.Msg, string) {
	za := l.zone.Lookup(name, qtype)
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
// zone, through the cache and appends its records; the reply takes its
// rcode (RFC 6604), as the server does for a query of the zone.
func chaseOut(ctx context.Context, a resolverAdapter, m *dns.Msg, target string, key wire.Key, by time.Time) error {
	ck, err := wire.NewKey(target, key.Type, key.Class, key.DO, key.CD)
	if err != nil {
		return fmt.Errorf("chasing %s: %w", target, err)
	}
	res, err := a.Resolve(ctx, ck, by)
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

// buildLocal builds the static records (an empty table when the config
// has none: a reload may add some) and the rewrite rules.
func (a *Agent) buildLocal() (*localAnswers, error) {
	cfg := a.cfg
	l := &localAnswers{zone: a.zone, domain: dns.Fqdn(strings.ToLower(cfg.ClusterDomain))}
	s, err := static.New(staticConfig(cfg), a.reg, a.log.With(logkey.Component, "static"))
	if err != nil {
		return nil, fmt.Errorf("--static-record/--static-file: %w", err)
	}
	l.static = s
	rules, err := parseRewrites(cfg.RewriteNames)
	if err != nil {
		return nil, err
	}
	l.rules.Store(&rules)
	return l, nil
}

func parseRewrites(specs []string) (rewrite.Rules, error) {
	var rules rewrite.Rules
	for _, spec := range specs {
		r, err := rewrite.Parse(spec)
		if err != nil {
			return nil, fmt.Errorf("--rewrite-name: %w", err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}
