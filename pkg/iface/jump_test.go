package iface

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

const (
	foreignFirst  = "-m comment --comment calico -j cali-PREROUTING"
	foreignSecond = "-m comment --comment kube-proxy -j KUBE-PREROUTING"
)

// TestJumpCopiesDeletedBySpec: a duplicate jump is removed while another writer inserts a rule at
// position 1 between the Manager's listing and its deletion. Deleting by a position read before
// the insert would remove the foreign rule that slid into that position.
func TestJumpCopiesDeletedBySpec(t *testing.T) {
	e := newEnv(t, baseConfig("169.254.20.10"), nil)
	e.setup(t)
	ref := ourChains()[0]
	jump := joinSpec(jumpSpec(ref))
	e.rules.set(FamilyV4, ref.Table, ref.Parent, jump, foreignSecond, jump) // a killed predecessor's copy
	var lists atomic.Int32
	e.rules.afterList = func(fam Family, table, chain string) {
		if fam == FamilyV4 && table == ref.Table && chain == ref.Parent && lists.Add(1) == 2 {
			e.rules.insertForeign(fam, table, chain, foreignFirst)
		}
	}
	_ = e.m.Setup(context.Background())
	e.rules.afterList = nil
	got := e.rules.get(FamilyV4, ref.Table, ref.Parent)
	for _, want := range []string{foreignFirst, foreignSecond, jump} {
		if n := countOf(got, want); n != 1 {
			t.Errorf("raw/PREROUTING: got %d copies of %q, want 1\n%s", n, want, joinLines(got))
		}
	}
}

// TestJumpYieldsPositionOne: a foreign writer that puts its own rule back at position 1 after every
// change (Calico in insert mode) is not fought: the Manager moves its jump back once, then leaves it
// second, warns once, and reports the state as converged.
func TestJumpYieldsPositionOne(t *testing.T) {
	e := newEnv(t, baseConfig("169.254.20.10"), nil)
	e.setup(t)
	ref := ourChains()[0]
	jump := joinSpec(jumpSpec(ref))
	calico := func() { // its rule first, exactly once, by its own spec
		rules := slices.DeleteFunc(e.rules.get(FamilyV4, ref.Table, ref.Parent), func(r string) bool { return r == foreignFirst })
		e.rules.set(FamilyV4, ref.Table, ref.Parent, append([]string{foreignFirst}, rules...)...)
	}
	moves := 0
	for range 6 {
		calico()
		_ = e.m.Setup(context.Background())
		if e.rules.get(FamilyV4, ref.Table, ref.Parent)[0] == jump {
			moves++
		}
	}
	if got := moves; got != 1 {
		t.Errorf("moves of the jump over 6 syncs against a writer that wants position 1: got %d, want 1", got)
	}
	got := e.rules.get(FamilyV4, ref.Table, ref.Parent)
	if want := []string{foreignFirst, jump}; !slices.Equal(got, want) {
		t.Errorf("raw/PREROUTING: got\n%s\nwant\n%s", joinLines(got), joinLines(want))
	}
	if n := e.logs.count(slog.LevelWarn, "position 1"); n != 1 {
		t.Errorf("warnings about position 1: got %d, want 1", n)
	}
	st, err := e.m.Check(context.Background())
	if err != nil {
		t.Errorf("Check after yielding: got %v, want nil", err)
	}
	for _, c := range st.Rules.Chains {
		if c.Family == "ipv4" && c.Chain == ref.Chain && (!c.Yielded || c.JumpFirst) {
			t.Errorf("status of %s: got yielded=%t first=%t, want yielded and not first", c.Chain, c.Yielded, c.JumpFirst)
		}
	}
	// A second copy of the jump is still removed while yielded; the foreign rule stays first, and
	// the jump goes right below it, not after the other rules.
	e.rules.set(FamilyV4, ref.Table, ref.Parent, foreignFirst, jump, foreignSecond, jump)
	_ = e.m.Setup(context.Background())
	if got, want := e.rules.get(FamilyV4, ref.Table, ref.Parent), []string{foreignFirst, jump, foreignSecond}; !slices.Equal(got, want) {
		t.Errorf("raw/PREROUTING after a duplicate while yielded: got\n%s\nwant\n%s", joinLines(got), joinLines(want))
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if strings.TrimSpace(x) == s {
			n++
		}
	}
	return n
}
