package iface

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// fakeRules is a stateful RuleHandle with iptables' constraints: built-in chains cannot be deleted,
// a chain that is jumped to cannot be deleted, a jump needs its target chain.
type fakeRules struct {
	ops *opLog

	mu     sync.Mutex                                // guards following
	chains map[Family]map[string]map[string][]string // family -> table -> chain -> rule specs
	fail   error                                     // returned by every mutating call when set
}

var _ RuleHandle = (*fakeRules)(nil)

func builtinChains() map[string][]string {
	return map[string][]string{tableRaw: {"PREROUTING", "OUTPUT"}, tableFilter: {"INPUT", "FORWARD", "OUTPUT"}}
}

func isBuiltin(table, chain string) bool { return slices.Contains(builtinChains()[table], chain) }

func newFakeRules(ops *opLog) *fakeRules {
	f := &fakeRules{ops: ops, chains: map[Family]map[string]map[string][]string{}}
	for _, fam := range []Family{FamilyV4, FamilyV6} {
		f.chains[fam] = map[string]map[string][]string{}
		for table, chains := range builtinChains() {
			f.chains[fam][table] = map[string][]string{}
			for _, c := range chains {
				f.chains[fam][table][c] = nil
			}
		}
	}
	return f
}

func (f *fakeRules) Backend() string { return "fake" }

func (f *fakeRules) ListRules(fam Family, table, chain string) ([]string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rules, ok := f.chains[fam][table][chain]
	return slices.Clone(rules), ok, nil
}

// targetOKLocked reports whether the -j target of spec exists (built-in
// targets always do). f.mu must be held.
func (f *fakeRules) targetOKLocked(fam Family, table, spec string) bool {
	_, target, ok := strings.Cut(spec, "-j ")
	if !ok || !strings.HasPrefix(target, "NODECACHE-") {
		return true
	}
	_, exists := f.chains[fam][table][target]
	return exists
}

func (f *fakeRules) ReplaceChain(fam Family, table, chain string, rules [][]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	var specs []string
	for _, r := range rules {
		specs = append(specs, joinSpec(r))
	}
	f.chains[fam][table][chain] = specs
	f.ops.add("rules:replace %s %s/%s %d", fam, table, chain, len(specs))
	return nil
}

func (f *fakeRules) InsertRule(fam Family, table, chain string, pos int, spec []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	rules, ok := f.chains[fam][table][chain]
	s := joinSpec(spec)
	switch {
	case !ok:
		return errors.New("no chain/target/match by that name")
	case pos < 1 || pos > len(rules)+1:
		return errors.New("index of insertion too big")
	case !f.targetOKLocked(fam, table, s):
		return errors.New("couldn't load target")
	}
	f.chains[fam][table][chain] = slices.Insert(rules, pos-1, s)
	f.ops.add("rules:insert %s %s/%s %d", fam, table, chain, pos)
	return nil
}

func (f *fakeRules) DeleteRuleAt(fam Family, table, chain string, pos int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	rules, ok := f.chains[fam][table][chain]
	if !ok || pos < 1 || pos > len(rules) {
		return errors.New("index of deletion too big")
	}
	f.chains[fam][table][chain] = slices.Delete(rules, pos-1, pos)
	f.ops.add("rules:delete-at %s %s/%s %d", fam, table, chain, pos)
	return nil
}

func (f *fakeRules) DeleteChain(fam Family, table, chain string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	if _, ok := f.chains[fam][table][chain]; !ok {
		return nil
	}
	if isBuiltin(table, chain) {
		return errors.New("cannot delete built-in chain")
	}
	for _, rules := range f.chains[fam][table] {
		for _, r := range rules {
			if strings.HasSuffix(r, "-j "+chain) {
				return errors.New("too many links")
			}
		}
	}
	delete(f.chains[fam][table], chain)
	f.ops.add("rules:delete-chain %s %s/%s", fam, table, chain)
	return nil
}

// external changes made by "someone else".
func (f *fakeRules) set(fam Family, table, chain string, rules ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.chains[fam][table][chain] = rules
}

func (f *fakeRules) get(fam Family, table, chain string) []string {
	rules, _, _ := f.ListRules(fam, table, chain)
	return rules
}

// dump renders every table like iptables-save, for comparing whole states.
func (f *fakeRules) dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, fam := range []Family{FamilyV4, FamilyV6} {
		for _, table := range []string{tableRaw, tableFilter} {
			var names []string
			for c := range f.chains[fam][table] {
				names = append(names, c)
			}
			slices.Sort(names)
			for _, c := range names {
				fmt.Fprintf(&b, "%s %s :%s\n", fam, table, c)
				for _, r := range f.chains[fam][table][c] {
					fmt.Fprintf(&b, "%s %s -A %s %s\n", fam, table, c, r)
				}
			}
		}
	}
	return b.String()
}

// count returns how many rules in the whole fake carry our comment.
func (f *fakeRules) count(fam Family) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, chains := range f.chains[fam] {
		for _, rules := range chains {
			for _, r := range rules {
				if strings.Contains(r, "--comment nodecache") {
					n++
				}
			}
		}
	}
	return n
}
