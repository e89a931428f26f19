package iface

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// chainView is what inspectChain saw of one of our chains and its jump.
type chainView struct {
	fam       Family
	ref       chainRef
	want      [][]string
	st        ChainStatus
	len       int    // rules in the chain as listed
	first     string // the first rule of ref.Parent as listed
	parentLen int    // rules in ref.Parent as listed
}

// rewrite reports whether the chain content differs from the desired set (order is not significant:
// our rules are independent of each other).
func (v chainView) rewrite() bool { return !v.st.Exists || v.st.Missing > 0 || v.st.Extra > 0 }

// fixJump reports whether the jump is not exactly once and first (or, having yielded position 1
// to a foreign rule, not exactly once).
func (v chainView) fixJump() bool { return v.st.Jumps != 1 || !v.st.JumpFirst && !v.st.Yielded }

// jumpKey names one jump of one family, for the Manager's record of moves.
type jumpKey struct {
	fam Family
	ref chainRef
}

// jumpPositions returns the 1-based positions of ref's jump in ref.Parent, and ref.Parent's rules.
func (m *Manager) jumpPositions(fam Family, ref chainRef) ([]int, []string, error) {
	rules, _, err := m.rules.ListRules(fam, ref.Table, ref.Parent)
	if err != nil {
		return nil, nil, fmt.Errorf("listing %s %s/%s: %w", fam, ref.Table, ref.Parent, err)
	}
	jump := joinSpec(jumpSpec(ref))
	var pos []int
	for i, r := range rules {
		if r == jump {
			pos = append(pos, i+1)
		}
	}
	return pos, rules, nil
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
	pos, parent, err := m.jumpPositions(fam, ref)
	if err != nil {
		return v, err
	}
	v.st.Jumps = len(pos)
	v.st.JumpFirst = len(pos) > 0 && pos[0] == 1
	v.st.Yielded = len(pos) > 0 && !v.st.JumpFirst && m.moved[jumpKey{fam, ref}] > 0
	v.parentLen = len(parent)
	if len(parent) > 0 {
		v.first = parent[0]
	}
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
	st := RulesStatus{State: StateOK, Backend: string(m.rules.Backend())}
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

// syncRules converges every chain, then every jump (a jump needs its chain), in the reverse of
// ourChains' order. Caller holds applyMu.
func (m *Manager) syncRules(ctx context.Context) (RulesStatus, error) {
	views, err := m.inspectRules(ctx)
	if err != nil {
		m.countErr(kindRule, err)
		st := m.rulesStatus(views)
		st.State = StateUnknown
		return st, err
	}
	changed := false
	var errs []error
	// Backwards: the reverse of ourChains' order, so the replies' NOTRACK (raw OUTPUT) is in place
	// before the queries' (raw PREROUTING); see ourChains.
	for _, v := range slices.Backward(views) {
		if !v.rewrite() {
			continue
		}
		changed = true
		if err := m.rules.ReplaceChain(v.fam, v.ref.Table, v.ref.Chain, v.want); err != nil {
			m.countErr(kindRule, err)
			errs = append(errs, fmt.Errorf("writing %s %s/%s: %w", v.fam, v.ref.Table, v.ref.Chain, err))
			continue
		}
		m.log.Info("rewrote chain", "family", v.fam.String(), "table", v.ref.Table, "chain", v.ref.Chain,
			"missing", v.st.Missing, "extra", v.st.Extra)
		m.countReadd(kindRule, v.st.Missing)
	}
	for _, v := range slices.Backward(views) {
		m.warnYieldedLocked(v)
		if !v.fixJump() {
			continue
		}
		changed = true
		if err := m.ensureJump(v); err != nil {
			m.countErr(kindJump, err)
			errs = append(errs, err)
		}
	}
	if changed {
		if views, err = m.inspectRules(ctx); err != nil {
			m.countErr(kindRule, err)
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

// ensureJump leaves exactly one jump to v.ref.Chain, at position 1 of v.ref.Parent. Copies are
// deleted by spec in the same atomic commit that inserts the one at position 1, never by a position
// read in an earlier call. A jump moved back to position 1 once and pushed down again has a foreign
// rule that also wants position 1 (Calico in insert mode, say): from then on it is left where it
// is (Yielded) rather than fought over every sync; extra copies are still removed, the one kept
// put at position 2, right below that rule.
func (m *Manager) ensureJump(v chainView) error {
	ref, key := v.ref, jumpKey{v.fam, v.ref}
	spec := jumpSpec(ref)
	at := 1
	if v.st.Yielded {
		// Right below the rule that wants position 1. Not "where the first copy
		// was": that position is read before other writers move rules, and the
		// jump would drift down the chain with every fix.
		at = min(2, v.parentLen-v.st.Jumps+1)
	}
	edits := append(deleteEdits(spec, v.st.Jumps), RuleEdit{At: at, Spec: spec})
	if err := m.rules.EditChain(v.fam, ref.Table, ref.Parent, edits); err != nil {
		return fmt.Errorf("fixing jump %s %s/%s -> %s: %w", v.fam, ref.Table, ref.Parent, ref.Chain, err)
	}
	switch {
	case v.st.Jumps == 0:
		m.log.Info("inserted jump", "family", v.fam.String(), "table", ref.Table, "chain", ref.Parent,
			"target", ref.Chain)
		m.countReadd(kindJump, 1)
	case !v.st.JumpFirst && !v.st.Yielded:
		m.moved[key]++
		m.log.Info("moved jump back to position 1", "family", v.fam.String(), "table", ref.Table,
			"chain", ref.Parent, "target", ref.Chain, "was_first", v.first)
	}
	return nil
}

// warnYieldedLocked logs, once per jump, that it was left below a foreign rule. Caller holds applyMu.
func (m *Manager) warnYieldedLocked(v chainView) {
	key := jumpKey{v.fam, v.ref}
	if !v.st.Yielded || m.yieldLogged[key] {
		return
	}
	m.yieldLogged[key] = true
	m.log.Warn("another rule keeps taking position 1; leaving our jump below it instead of fighting",
		"family", v.fam.String(), "table", v.ref.Table, "chain", v.ref.Parent, "target", v.ref.Chain, "first", v.first)
}

// deleteJumps deletes every copy of ref's jump, by spec. A copy that vanishes meanwhile (another
// agent or `nodecache cleanup` deleting it too) fails the commit; it is retried on a fresh count.
func (m *Manager) deleteJumps(fam Family, ref chainRef) error {
	var err error
	for range 5 {
		var pos []int
		if pos, _, err = m.jumpPositions(fam, ref); err != nil || len(pos) == 0 {
			return err
		}
		if err = m.rules.EditChain(fam, ref.Table, ref.Parent, deleteEdits(jumpSpec(ref), len(pos))); err == nil {
			return nil
		}
	}
	return fmt.Errorf("deleting jumps %s %s/%s: %w", fam, ref.Table, ref.Parent, err)
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
			errs = append(errs, m.deleteJumps(fam, ref))
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
		m.countErr(kindRule, err)
		return len(stale), fmt.Errorf("removing stale rules: %w", err)
	}
	return len(stale), nil
}
