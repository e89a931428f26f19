package iface

import (
	"context"
	"errors"
	"fmt"
)

// chainView is what inspectChain saw of one of our chains and its jump.
type chainView struct {
	fam  Family
	ref  chainRef
	want [][]string
	st   ChainStatus
	len  int // rules in the chain as listed
}

// rewrite reports whether the chain content differs from the desired set (order is not significant:
// our rules are independent of each other).
func (v chainView) rewrite() bool { return !v.st.Exists || v.st.Missing > 0 || v.st.Extra > 0 }

// fixJump reports whether the jump is not exactly once and first.
func (v chainView) fixJump() bool { return v.st.Jumps != 1 || !v.st.JumpFirst }

// jumpPositions returns the 1-based positions of ref's jump in ref.Parent.
func (m *Manager) jumpPositions(fam Family, ref chainRef) ([]int, error) {
	rules, _, err := m.rules.ListRules(fam, ref.Table, ref.Parent)
	if err != nil {
		return nil, fmt.Errorf("listing %s %s/%s: %w", fam, ref.Table, ref.Parent, err)
	}
	jump := joinSpec(jumpSpec(ref))
	var pos []int
	for i, r := range rules {
		if r == jump {
			pos = append(pos, i+1)
		}
	}
	return pos, nil
}

// inspectChain compares one chain and its jump with the desired state, read-only.
func (m *Manager) inspectChain(fam Family, ref chainRef, want [][]string) (chainView, error) {
	v := chainView{fam: fam, ref: ref, want: want, st: ChainStatus{
		Family: fam.String(), Table: ref.Table, Chain: ref.Chain, Parent: ref.Parent, Want: len(want),
	}}
	rules, exists, err := m.rules.ListRules(fam, ref.Table, ref.Chain)
	if err != nil {
		return v, fmt.Errorf("listing %s %s/%s: %w", fam, ref.Table, ref.Chain, err)
	}
	v.st.Exists, v.len = exists, len(rules)
	have := make(map[string]int, len(rules))
	for _, r := range rules {
		have[r]++
	}
	for _, w := range want {
		if k := joinSpec(w); have[k] > 0 {
			have[k]--
			v.st.Present++
		} else {
			v.st.Missing++
		}
	}
	v.st.Extra = len(rules) - v.st.Present
	pos, err := m.jumpPositions(fam, ref)
	if err != nil {
		return v, err
	}
	v.st.Jumps = len(pos)
	v.st.JumpFirst = len(pos) > 0 && pos[0] == 1
	return v, nil
}

// inspectRules inspects every chain of every family that has local IPs.
func (m *Manager) inspectRules(ctx context.Context) ([]chainView, error) {
	var views []chainView
	for _, fam := range m.cfg.families() {
		want := desiredRules(m.cfg, fam)
		for _, ref := range ourChains() {
			if err := ctx.Err(); err != nil {
				return views, err
			}
			v, err := m.inspectChain(fam, ref, want[ref])
			if err != nil {
				return views, err
			}
			views = append(views, v)
		}
	}
	return views, nil
}

func (m *Manager) rulesStatus(views []chainView) RulesStatus {
	st := RulesStatus{State: StateOK, Backend: m.rules.Backend()}
	for _, v := range views {
		st.Chains = append(st.Chains, v.st)
		if !v.st.ok() {
			st.State = StateDrift
		}
	}
	if len(views) == 0 {
		st.State = StateUnknown
	}
	return st
}

// syncRules converges every chain, then every jump (a jump needs its chain). Caller holds applyMu.
func (m *Manager) syncRules(ctx context.Context) (RulesStatus, error) {
	views, err := m.inspectRules(ctx)
	if err != nil {
		m.countErr(kindRule)
		st := m.rulesStatus(views)
		st.State = StateUnknown
		return st, err
	}
	changed := false
	var errs []error
	for _, v := range views {
		if !v.rewrite() {
			continue
		}
		changed = true
		if err := m.rules.ReplaceChain(v.fam, v.ref.Table, v.ref.Chain, v.want); err != nil {
			m.countErr(kindRule)
			errs = append(errs, fmt.Errorf("writing %s %s/%s: %w", v.fam, v.ref.Table, v.ref.Chain, err))
			continue
		}
		m.log.Info("rewrote chain", "family", v.fam.String(), "table", v.ref.Table, "chain", v.ref.Chain,
			"missing", v.st.Missing, "extra", v.st.Extra)
		m.countReadd(kindRule, v.st.Missing)
	}
	for _, v := range views {
		if !v.fixJump() {
			continue
		}
		changed = true
		if err := m.ensureJump(v); err != nil {
			m.countErr(kindJump)
			errs = append(errs, err)
		}
	}
	if changed {
		if views, err = m.inspectRules(ctx); err != nil {
			m.countErr(kindRule)
			errs = append(errs, err)
		}
	}
	st := m.rulesStatus(views)
	total := 0
	for _, v := range views {
		total += v.len + v.st.Jumps
	}
	m.met.rules.Set(float64(total))
	return st, errors.Join(errs...)
}

// ensureJump leaves exactly one jump to v.ref.Chain, at position 1 of v.ref.Parent.
func (m *Manager) ensureJump(v chainView) error {
	ref := v.ref
	if !v.st.JumpFirst {
		if err := m.rules.InsertRule(v.fam, ref.Table, ref.Parent, 1, jumpSpec(ref)); err != nil {
			return fmt.Errorf("inserting jump %s %s/%s -> %s: %w", v.fam, ref.Table, ref.Parent, ref.Chain, err)
		}
		m.log.Info("inserted jump", "family", v.fam.String(), "table", ref.Table, "chain", ref.Parent,
			"target", ref.Chain)
		if v.st.Jumps == 0 {
			m.countReadd(kindJump, 1)
		}
	}
	return m.deleteJumps(v.fam, ref, 1)
}

// deleteJumps deletes copies of ref's jump beyond the first keep, last first. It re-lists before each
// deletion so that a position is never stale by more than one iptables call.
func (m *Manager) deleteJumps(fam Family, ref chainRef, keep int) error {
	for range 64 { // bound: a chain holding more copies than this is not ours to fix in one pass
		pos, err := m.jumpPositions(fam, ref)
		if err != nil || len(pos) <= keep {
			return err
		}
		last := pos[len(pos)-1]
		if err := m.rules.DeleteRuleAt(fam, ref.Table, ref.Parent, last); err != nil {
			return fmt.Errorf("deleting jump %s %s/%s #%d: %w", fam, ref.Table, ref.Parent, last, err)
		}
	}
	return fmt.Errorf("deleting jumps %s %s/%s: too many copies", fam, ref.Table, ref.Parent)
}

// teardownRules removes all jumps first, then our chains, in every family that has local IPs, and
// whatever a predecessor left in the others.
func (m *Manager) teardownRules(ctx context.Context) error {
	errs := []error{m.removeRules(ctx, m.cfg.families())}
	if _, err := m.removeStaleFamilies(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeRules deletes every jump to our chains, then the chains, in fams.
func (m *Manager) removeRules(ctx context.Context, fams []Family) error {
	var errs []error
	for _, fam := range fams {
		for _, ref := range ourChains() {
			if err := ctx.Err(); err != nil {
				return err
			}
			errs = append(errs, m.deleteJumps(fam, ref, 0))
		}
	}
	for _, fam := range fams {
		for _, ref := range ourChains() {
			if err := m.rules.DeleteChain(fam, ref.Table, ref.Chain); err != nil {
				errs = append(errs, fmt.Errorf("deleting %s %s/%s: %w", fam, ref.Table, ref.Chain, err))
			}
		}
	}
	return errors.Join(errs...)
}

// removeStaleFamilies removes our chains and jumps from the families that have no local IPs now,
// left by a predecessor run with other --local-ip values, so they do not linger. A family this
// host cannot list (no ip6tables) holds nothing of ours.
func (m *Manager) removeStaleFamilies(ctx context.Context) (int, error) {
	var stale []Family
	for _, fam := range m.cfg.staleFamilies() {
		for _, ref := range ourChains() {
			_, exists, err := m.rules.ListRules(fam, ref.Table, ref.Chain)
			if err == nil && exists {
				stale = append(stale, fam)
				break
			}
		}
	}
	if len(stale) == 0 {
		return 0, nil
	}
	for _, fam := range stale {
		m.log.Info("removing rules left in a family without local IPs", "family", fam.String())
	}
	if err := m.removeRules(ctx, stale); err != nil {
		m.countErr(kindRule)
		return len(stale), fmt.Errorf("removing stale rules: %w", err)
	}
	return len(stale), nil
}
