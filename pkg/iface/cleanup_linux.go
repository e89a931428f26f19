//go:build linux

package iface

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
)

// Cleanup removes what a Manager of cfg may have left on the host after a crash: our jumps and
// chains in both iptables flavours (nft and legacy) and both families, whatever cfg.LocalIPs and
// cfg.IPTablesMode say, then the addresses and the link, when cfg.SetupIPTables and
// cfg.SetupInterface ask for those parts. A link that is not nodecache's is refused (ErrForeignLink)
// and left alone. It is idempotent: with nothing left it changes nothing and returns nil.
func Cleanup(ctx context.Context, cfg Config, log *slog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if log == nil {
		return errors.New("iface: nil logger")
	}
	var errs []error
	if cfg.SetupIPTables {
		for _, mode := range []IPTablesMode{ModeNFT, ModeLegacy} {
			errs = append(errs, cleanupFlavour(ctx, cfg, mode, log))
		}
	}
	if cfg.SetupInterface {
		links, err := newNetlinkLinks()
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("iface: %w", err))...)
		}
		lc := cfg
		lc.SetupIPTables = false
		m, err := NewWithBackends(lc, links, nil, nil, log)
		if err == nil {
			err = m.Teardown(ctx)
			_ = m.Close()
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// cleanupFlavour removes our jumps and chains from the families of one flavour whose binaries are
// installed; a flavour without binaries holds nothing of ours.
func cleanupFlavour(ctx context.Context, cfg Config, mode IPTablesMode, log *slog.Logger) error {
	var fams []Family
	for _, fam := range []Family{FamilyV4, FamilyV6} {
		if _, err := exec.LookPath(binary(fam, mode, "")); err == nil {
			fams = append(fams, fam)
		}
	}
	if len(fams) == 0 {
		return nil
	}
	rules, err := newXtablesRules(ctx, mode, fams)
	if err != nil {
		return fmt.Errorf("iface: cleanup %s: %w", mode, err)
	}
	rc := cfg
	rc.SetupInterface, rc.IPTablesMode = false, mode
	m, err := NewWithBackends(rc, nil, rules, nil, log.With("backend", string(mode)))
	if err != nil {
		return err
	}
	defer m.Close()
	return m.Teardown(ctx)
}
