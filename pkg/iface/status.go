package iface

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// ErrNotConverged is returned (wrapped) by Check when the kernel state differs from the desired one.
var ErrNotConverged = errors.New("interface or rules not converged")

// Part states reported in Status.
const (
	StateOK       = "ok"
	StateDrift    = "drift"
	StateDisabled = "disabled"
	StateUnknown  = "unknown" // not inspected yet, or inspection failed
)

// Status is a snapshot of what the Manager last saw and did. It is a value: safe to keep and print.
type Status struct {
	Interface InterfaceStatus
	Rules     RulesStatus
	// LastError is the error of the last reconcile, "" when it succeeded.
	LastError string
	// LastReconcile is when the last reconcile finished; zero before the first.
	LastReconcile time.Time
	Counts        Counts
}

// InterfaceStatus describes the link and its addresses.
type InterfaceStatus struct {
	State     string // StateOK, StateDrift, StateDisabled or StateUnknown
	Name      string
	Present   bool
	Kind      string // "dummy" or "bridge" (or the kind of a foreign link of that name)
	Up        bool
	Addresses []netip.Addr // desired addresses found on the link
	Missing   []netip.Addr // desired addresses not found
	// IPVSHeld are the local IPs kube-ipvs0 also carries (kube-proxy in IPVS mode): IPVS sends
	// queries to them to the Service's endpoints, so the agent does not get them. It does not
	// change State: the agent still serves its other IPs.
	IPVSHeld []netip.Addr
}

// RulesStatus describes our chains in every family that has local IPs.
type RulesStatus struct {
	State   string // StateOK, StateDrift, StateDisabled or StateUnknown
	Backend string // an IPTablesMode in use (ModeNFT or ModeLegacy), or StateDisabled
	Chains  []ChainStatus
}

// ChainStatus describes one of our chains and its jump, for one family.
type ChainStatus struct {
	Family    string // "ipv4" or "ipv6"
	Table     string
	Chain     string
	Parent    string // built-in chain holding the jump
	Exists    bool
	Want      int // desired rules
	Present   int // desired rules found (each counted once)
	Missing   int // desired rules not found
	Extra     int // duplicates, stale rules, or rules out of order
	Jumps     int // copies of the jump in Parent
	JumpFirst bool
	// Yielded: the jump is not first because a foreign rule keeps taking position 1; the Manager
	// moved it back once and now leaves it there instead of fighting.
	Yielded bool
}

// ok reports whether the chain matches the desired state exactly.
func (c ChainStatus) ok() bool {
	return c.Exists && c.Missing == 0 && c.Extra == 0 && c.Jumps == 1 && (c.JumpFirst || c.Yielded)
}

// Counts are running totals since the Manager was created (mirrors of the metrics).
type Counts struct {
	Reconciles    uint64
	ReconcileErrs uint64
	Readds        KindCounts
	Errors        KindCounts
}

// KindCounts splits a count by what was involved.
type KindCounts struct {
	Link, Address, Rule, Jump, Watch uint64
}

func (k *KindCounts) add(kind string, n uint64) {
	switch kind {
	case kindLink:
		k.Link += n
	case kindAddress:
		k.Address += n
	case kindRule:
		k.Rule += n
	case kindJump:
		k.Jump += n
	case kindWatch:
		k.Watch += n
	}
}

// Converged reports whether every enabled part is in the desired state.
func (s Status) Converged() bool {
	okOrOff := func(st string) bool { return st == StateOK || st == StateDisabled }
	return okOrOff(s.Interface.State) && okOrOff(s.Rules.State)
}

// drift describes what is not converged, for error messages; "" when converged.
func (s Status) drift() string {
	var parts []string
	if s.Interface.State != StateOK && s.Interface.State != StateDisabled {
		switch {
		case !s.Interface.Present:
			parts = append(parts, fmt.Sprintf("link %s absent", s.Interface.Name))
		case !s.Interface.Up:
			parts = append(parts, fmt.Sprintf("link %s down", s.Interface.Name))
		}
		if len(s.Interface.Missing) > 0 {
			parts = append(parts, fmt.Sprintf("addresses missing: %v", s.Interface.Missing))
		}
	}
	for _, c := range s.Rules.Chains {
		if !c.ok() {
			parts = append(parts, fmt.Sprintf("%s %s/%s: exists=%t missing=%d extra=%d jumps=%d first=%t",
				c.Family, c.Table, c.Chain, c.Exists, c.Missing, c.Extra, c.Jumps, c.JumpFirst))
		}
	}
	return strings.Join(parts, "; ")
}
