//go:build linux

package iface

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// New returns a Manager acting on the kernel: rtnetlink for the link, the iptables binaries of the
// configured (or, for "auto", detected) flavour for the rules. It acts in the network namespace of
// the calling process. reg and log may be nil, as for NewWithBackends.
func New(cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := cfg.withDefaults()
	var (
		links LinkHandle
		rules RuleHandle
	)
	if d.SetupInterface {
		l, err := newNetlinkLinks()
		if err != nil {
			return nil, fmt.Errorf("iface: %w", err)
		}
		links = l
	}
	if d.SetupIPTables {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := newXtablesRules(ctx, d.IPTablesMode, d.families())
		if err != nil {
			return nil, fmt.Errorf("iface: %w", err)
		}
		rules = r
	}
	return NewWithBackends(cfg, links, rules, reg, log)
}
