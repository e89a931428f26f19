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
	// afterList, when set, runs after every ListRules (without f.mu): another writer acting
	// between the Manager's listing and its next call.
	afterList func(fam Family, table, chain string)
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

func (f *fakeRules) Backend() IPTablesMode { return "fake" }

func (f *fakeRules) ListRules(fam Family, table, chain string) ([]string, bool, error) {
	f.mu.Lock()
	rules, ok := f.chains[fam][table][chain]
	rules = slices.Clone(rules)
	hook := f.afterList
	f.mu.Unlock()
	if hook != nil {
		hook(fam, table, chain)
	}
	return rules, ok, nil
}

// insertForeign inserts spec at position 1, as another writer does.
func (f *fakeRules) insertForeign(fam Family, table, chain, spec string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.chains[fam][table][chain] = slices.Insert(f.chains[fam][table][chain], 0, spec)
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

// EditChain applies edits to a copy of the chain and commits it only when all succeed, like one
// iptables-restore --noflush.
func (f *fakeRules) EditChain(fam Family, table, chain string, edits []RuleEdit) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	rules, ok := f.chains[fam][table][chain]
	if !ok {
		return errors.New("no chain/target/match by that name")
	}
	rules = slices.Clone(rules)
	for _, e := range edits {
		s := joinSpec(e.Spec)
		if e.At > 0 {
			switch {
			case e.At > len(rules)+1:
				return errors.New("index of insertion too big")
			case !f.targetOKLocked(fam, table, s):
				return errors.New("couldn't load target")
			}
			rules = slices.Insert(rules, e.At-1, s)
			continue
		}
		i := slices.Index(rules, s)
		if i < 0 {
			return errors.New("bad rule (does a matching rule exist in that chain?)")
		}
		rules = slices.Delete(rules, i, i+1)
	}
	f.chains[fam][table][chain] = rules
	f.ops.add("rules:edit %s %s/%s %d", fam, table, chain, len(edits))
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
