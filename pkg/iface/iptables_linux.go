//go:build linux

package iface

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-iptables/iptables"
)

// lockWaitSeconds bounds the wait for the xtables lock (go-iptables passes --wait N).
const lockWaitSeconds = 5

// xtablesRules is the real RuleHandle: iptables and ip6tables binaries of one flavour.
type xtablesRules struct {
	mode IPTablesMode                  // ModeNFT or ModeLegacy
	ipt  map[Family]*iptables.IPTables // only families with local IPs
}

var _ RuleHandle = (*xtablesRules)(nil)

// binary returns the flavoured command name, e.g. ip6tables-legacy or iptables-nft-save.
func binary(fam Family, mode IPTablesMode, suffix string) string {
	cmd := "iptables"
	if fam == FamilyV6 {
		cmd = "ip6tables"
	}
	return cmd + "-" + string(mode) + suffix
}

// newXtablesRules resolves mode ("auto" is detected here) and opens the binaries of each family.
func newXtablesRules(ctx context.Context, mode IPTablesMode, fams []Family) (*xtablesRules, error) {
	if mode == ModeAuto {
		mode = detectMode(ctx)
	}
	r := &xtablesRules{mode: mode, ipt: make(map[Family]*iptables.IPTables, len(fams))}
	for _, fam := range fams {
		proto := iptables.ProtocolIPv4
		if fam == FamilyV6 {
			proto = iptables.ProtocolIPv6
		}
		path, err := exec.LookPath(binary(fam, mode, ""))
		if err != nil {
			return nil, fmt.Errorf("finding %s: %w", binary(fam, mode, ""), err)
		}
		ipt, err := iptables.New(iptables.IPFamily(proto), iptables.Path(path), iptables.Timeout(lockWaitSeconds))
		if err != nil {
			return nil, fmt.Errorf("opening %s: %w", path, err)
		}
		r.ipt[fam] = ipt
	}
	return r, nil
}

// detectMode runs the -save commands of both flavours (missing or failing ones count as empty).
func detectMode(ctx context.Context) IPTablesMode {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	dump := func(mode IPTablesMode) string {
		var out bytes.Buffer
		for _, fam := range []Family{FamilyV4, FamilyV6} {
			cmd := exec.CommandContext(ctx, binary(fam, mode, "-save"))
			cmd.Stdout = &out
			_ = cmd.Run() // an absent flavour has nothing to say
		}
		return out.String()
	}
	return chooseMode(dump(ModeLegacy), dump(ModeNFT))
}

func (r *xtablesRules) Backend() IPTablesMode { return r.mode }

func (r *xtablesRules) get(fam Family) (*iptables.IPTables, error) {
	ipt, ok := r.ipt[fam]
	if !ok {
		return nil, fmt.Errorf("no %s backend: no local IP of that family", fam)
	}
	return ipt, nil
}

// notExist reports an exit status of 1 from a listing, which iptables uses for "no such chain".
func notExist(err error) bool {
	var e *iptables.Error
	return errors.As(err, &e) && e.ExitStatus() == 1
}

func (r *xtablesRules) ListRules(fam Family, table, chain string) ([]string, bool, error) {
	ipt, err := r.get(fam)
	if err != nil {
		return nil, false, err
	}
	lines, err := ipt.List(table, chain)
	if notExist(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	prefix := "-A " + chain + " "
	var rules []string
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			rules = append(rules, rest)
		}
	}
	return rules, true, nil
}

// ReplaceChain writes the chain with one iptables-restore --noflush run: declaring a user chain flushes
// it, and the table is committed atomically, so packets never see the chain half written.
func (r *xtablesRules) ReplaceChain(fam Family, table, chain string, rules [][]string) error {
	var in bytes.Buffer
	fmt.Fprintf(&in, "*%s\n:%s - [0:0]\n", table, chain)
	for _, spec := range rules {
		fmt.Fprintf(&in, "-A %s %s\n", chain, joinSpec(spec))
	}
	in.WriteString("COMMIT\n")
	return r.restore(fam, &in)
}

// EditChain runs the edits as -D and -I lines of one iptables-restore --noflush: the commit is
// atomic, and a -D of a rule that is no longer there fails it as a whole.
func (r *xtablesRules) EditChain(fam Family, table, chain string, edits []RuleEdit) error {
	if len(edits) == 0 {
		return nil
	}
	var in bytes.Buffer
	fmt.Fprintf(&in, "*%s\n", table)
	for _, e := range edits {
		if e.At > 0 {
			fmt.Fprintf(&in, "-I %s %d %s\n", chain, e.At, joinSpec(e.Spec))
		} else {
			fmt.Fprintf(&in, "-D %s %s\n", chain, joinSpec(e.Spec))
		}
	}
	in.WriteString("COMMIT\n")
	return r.restore(fam, &in)
}

// restore feeds in to the family's iptables-restore --noflush.
func (r *xtablesRules) restore(fam Family, in *bytes.Buffer) error {
	if _, err := r.get(fam); err != nil {
		return err
	}
	bin := binary(fam, r.mode, "-restore")
	cmd := exec.Command(bin, "--noflush", "--wait", strconv.Itoa(lockWaitSeconds))
	cmd.Stdin = in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("running %s: %w: %s", bin, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func (r *xtablesRules) DeleteChain(fam Family, table, chain string) error {
	ipt, err := r.get(fam)
	if err != nil {
		return err
	}
	return ipt.ClearAndDeleteChain(table, chain)
}
