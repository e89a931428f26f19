package upstream

import (
	"fmt"
	"time"

	"golang.org/x/sync/semaphore"
)

// StubOptions are a stub domain's own forwarding settings, for the
// per-zone options of a Corefile's forward plugin. A zero field takes the
// Forwarder's setting.
type StubOptions struct {
	// Policy orders the stub's servers; "" takes Config.Policy.
	Policy Policy
	// ForceTCP sends every query to the stub's servers over TCP (pooled
	// connections), never UDP.
	ForceTCP bool
	// TryTimeout bounds one attempt at one of the stub's servers; zero
	// takes Config.TryTimeout.
	TryTimeout time.Duration
	// MaxInFlight caps the queries in flight to the stub's servers,
	// within Config.MaxInFlight; beyond it Exchange returns ErrOverloaded.
	// Zero means only the Forwarder's cap.
	MaxInFlight int
}

func (o *StubOptions) validate(domain string) error {
	if err := o.Policy.Validate(); err != nil {
		return fmt.Errorf("stub domain %s: %w", domain, err)
	}
	if o.TryTimeout < 0 || o.MaxInFlight < 0 {
		return fmt.Errorf("stub domain %s: timeout and max in flight must not be negative", domain)
	}
	return nil
}

// setOptions gives ss the options of its stub domain.
func (ss *serverSet) setOptions(o StubOptions) {
	ss.opts = o
	if o.MaxInFlight > 0 {
		ss.sem = semaphore.NewWeighted(int64(o.MaxInFlight))
	}
}

// policy is the set's policy, else def.
func (ss *serverSet) policy(def Policy) Policy {
	if ss.opts.Policy != "" {
		return ss.opts.Policy
	}
	return def
}

// tryTimeout is the set's per-try timeout, else def.
func (ss *serverSet) tryTimeout(def time.Duration) time.Duration {
	if ss.opts.TryTimeout > 0 {
		return ss.opts.TryTimeout
	}
	return def
}

// markTCPProbe makes the servers of a TCP-only set probed over TCP when
// down: a server asked only over TCP may answer no UDP at all.
func (ss *serverSet) markTCPProbe() {
	for _, s := range ss.servers {
		s.tcpProbe = s.tcpProbe || ss.opts.ForceTCP
	}
}
