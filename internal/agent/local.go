package agent

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/logkey"
	"github.com/nodecache/nodecache/pkg/rewrite"
	"github.com/nodecache/nodecache/pkg/server"
	"github.com/nodecache/nodecache/pkg/static"
)

// localResolver wraps next, the cache, in what the agent answers before
// it, one layer a line: the rewrite rules (whose targets may be static, in
// the cluster zone or upstream), then the static records, answered first.
// The static table is built empty when the config has none: a reload may
// add some. zone is nil without a zone source.
func (a *Agent) localResolver(next server.Resolver, zone server.Zone) (server.Resolver, error) {
	cfg := a.cfg
	rules, err := parseRewrites(cfg.RewriteNames)
	if err != nil {
		return nil, err
	}
	if a.static, err = static.New(staticConfig(cfg), a.reg, a.log.With(logkey.Component, "static")); err != nil {
		return nil, fmt.Errorf("--static-record/--static-file: %w", err)
	}
	local := rewrite.Local{Static: a.static, Zone: zone, Domain: dns.Fqdn(strings.ToLower(cfg.ClusterDomain))}
	a.rewrites = rewrite.NewResolver(rules, local, next) // --rewrite-name
	return a.static.Wrap(a.rewrites), nil                // --static-record, --static-file
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
