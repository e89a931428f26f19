package iface

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/logkey"
)

// Manager keeps the link, its addresses and our iptables rules in the desired state.
// All methods are safe for concurrent use; kernel changes are serialised.
type Manager struct {
	cfg   Config     // defaults applied; never changes
	links LinkHandle // nil when !cfg.SetupInterface
	rules RuleHandle // nil when !cfg.SetupIPTables
	log   *slog.Logger
	met   *metrics
	now   func() time.Time

	running atomic.Bool // Run is active

	closeOnce sync.Once
	closeErr  error // set once by Close

	applyMu sync.Mutex // serialises kernel access; taken before mu
	// guarded by applyMu:
	dummyUnsupported bool             // LinkAdd(dummy) failed with ErrLinkKindUnsupported once
	initialized      bool             // a reconcile succeeded; later additions count as re-adds
	tornDown         bool             // Teardown ran; reconciles are no-ops until the next Setup
	moved            map[jumpKey]int  // times a jump was moved back to position 1
	yieldLogged      map[jumpKey]bool // the warning about yielding position 1 was logged
	ipvsLogged       []netip.Addr     // the local IPs on kube-ipvs0 last logged

	mu     sync.Mutex // guards following
	status Status
}

// NewWithBackends returns a Manager that acts through links and rules. links may be nil when
// cfg.SetupInterface is false, rules when cfg.SetupIPTables is false. reg may be nil: the metrics
// are then kept but registered nowhere. log may be nil: logs are then discarded.
func NewWithBackends(cfg Config, links LinkHandle, rules RuleHandle, reg prometheus.Registerer, log *slog.Logger) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.SetupInterface && links == nil {
		return nil, errors.New("iface: interface setup enabled without a link handle")
	}
	if cfg.SetupIPTables && rules == nil {
		return nil, errors.New("iface: iptables setup enabled without a rule handle")
	}
	met, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("iface: registering metrics: %w", err)
	}
	cfg = cfg.withDefaults()
	m := &Manager{cfg: cfg, log: log, met: met, now: time.Now,
		moved: map[jumpKey]int{}, yieldLogged: map[jumpKey]bool{}}
	if cfg.SetupInterface {
		m.links = links
	}
	if cfg.SetupIPTables {
		m.rules = rules
	}
	m.status = Status{
		Interface: InterfaceStatus{State: StateUnknown, Name: cfg.InterfaceName},
		Rules:     RulesStatus{State: StateUnknown},
	}
	if !cfg.SetupInterface {
		m.status.Interface.State = StateDisabled
	}
	if cfg.SetupIPTables {
		m.status.Rules.Backend = string(rules.Backend())
	} else {
		m.status.Rules = RulesStatus{State: StateDisabled, Backend: StateDisabled}
	}
	return m, nil
}

// Setup brings the link and its addresses, then the rules, to the desired state, adopting whatever a
// predecessor left. It is idempotent. The caller starts the listeners before calling it.
func (m *Manager) Setup(ctx context.Context) error {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.tornDown = false
	if err := m.reconcileLocked(ctx, true); err != nil {
		return fmt.Errorf("iface: setup: %w", err)
	}
	if m.rules != nil {
		if _, err := m.removeStaleFamilies(ctx); err != nil {
			return fmt.Errorf("iface: setup: %w", err)
		}
	}
	return nil
}

// Run reconciles every cfg.SyncInterval, and the link and addresses at once on any netlink link or
// address event, until ctx is done. It returns nil then; it stops and waits for its watchers first.
func (m *Manager) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return errors.New("iface: Run is already running")
	}
	defer m.running.Store(false)
	if !m.cfg.SetupInterface && !m.cfg.SetupIPTables {
		<-ctx.Done()
		return nil
	}
	ticker := time.NewTicker(m.cfg.SyncInterval)
	defer ticker.Stop()
	var w watch
	defer w.stop()
	m.startWatch(&w)
	_ = m.reconcile(ctx, true)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			if w.events == nil {
				m.startWatch(&w)
			}
			_ = m.reconcile(ctx, true)
		case _, ok := <-w.events:
			if !ok {
				m.countErr(kindWatch, nil)
				m.log.Warn("netlink subscription ended; relying on the periodic sync until it is renewed")
				w.stop()
				continue
			}
			_ = m.reconcile(ctx, false)
		}
	}
}

// watch is one netlink subscription of Run.
type watch struct {
	done   chan struct{}
	events <-chan struct{} // nil when not subscribed
}

func (m *Manager) startWatch(w *watch) {
	if m.links == nil {
		return
	}
	done := make(chan struct{})
	events, err := m.links.Watch(done)
	if err != nil {
		close(done)
		m.countErr(kindWatch, err)
		m.log.Warn("subscribing to netlink events failed; relying on the periodic sync", logkey.Err, err)
		return
	}
	w.done, w.events = done, events
}

// stop ends the subscription and waits for its goroutines (they close events when they return).
func (w *watch) stop() {
	if w.done == nil {
		return
	}
	close(w.done)
	for range w.events {
	}
	w.done, w.events = nil, nil
}

// Teardown removes the rules (jumps, then chains), then the addresses, then the link. It is idempotent
// and stops later reconciles (of a Run still going) from putting things back, until the next Setup.
func (m *Manager) Teardown(ctx context.Context) error {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.tornDown = true
	var errs []error
	if m.rules != nil {
		errs = append(errs, m.teardownRules(ctx))
	}
	if m.links != nil {
		errs = append(errs, m.teardownLink(ctx))
	}
	err := errors.Join(errs...)
	m.mu.Lock()
	if m.links != nil {
		m.status.Interface = InterfaceStatus{State: StateUnknown, Name: m.cfg.InterfaceName}
	}
	if m.rules != nil {
		m.status.Rules = RulesStatus{State: StateUnknown, Backend: string(m.rules.Backend())}
	}
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("iface: teardown: %w", err)
	}
	if m.cfg.SetupInterface || m.cfg.SetupIPTables {
		m.log.Info("removed interface and rules", "interface", m.cfg.InterfaceName)
	}
	return nil
}

// Close releases the backends' resources (the netlink socket). It does not undo anything in the
// kernel: that is Teardown. It is idempotent; the Manager must not be used afterwards.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() {
		if c, ok := m.links.(io.Closer); ok {
			m.closeErr = c.Close()
		}
	})
	return m.closeErr
}

// Status returns what the last reconcile saw and did.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return cloneStatus(m.status)
}

// Check inspects the kernel without changing it. The error wraps ErrNotConverged when the state
// differs from the desired one, and is some other error when inspection failed.
func (m *Manager) Check(ctx context.Context) (Status, error) {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	st := m.Status()
	if m.links != nil {
		v, err := m.inspectLink()
		st.Interface = v.st
		if err != nil {
			return st, fmt.Errorf("iface: check: %w", err)
		}
		if st.Interface.IPVSHeld, err = m.ipvsHeld(); err != nil {
			return st, fmt.Errorf("iface: check: %w", err)
		}
	}
	if m.rules != nil {
		views, err := m.inspectRules(ctx)
		st.Rules = m.rulesStatus(views)
		if err != nil {
			st.Rules.State = StateUnknown
			return st, fmt.Errorf("iface: check: %w", err)
		}
	}
	if d := st.drift(); d != "" {
		return st, fmt.Errorf("iface: %s: %w", d, ErrNotConverged)
	}
	return st, nil
}

func (m *Manager) reconcile(ctx context.Context, rulesToo bool) error {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	if m.tornDown {
		return nil
	}
	return m.reconcileLocked(ctx, rulesToo)
}

// reconcileLocked converges the link (always) and the rules (when rulesToo). Caller holds applyMu.
func (m *Manager) reconcileLocked(ctx context.Context, rulesToo bool) error {
	var errs []error
	m.mu.Lock()
	ist, rst := m.status.Interface, m.status.Rules
	m.mu.Unlock()
	if m.links != nil {
		var err error
		ist, err = m.syncLink()
		errs = append(errs, err, m.noteIPVSLocked(&ist))
	}
	if rulesToo && m.rules != nil {
		var err error
		rst, err = m.syncRules(ctx)
		errs = append(errs, err)
	}
	err := errors.Join(errs...)
	result := "ok"
	if err != nil {
		result = "error"
		m.log.Warn("reconcile failed", logkey.Err, err)
	} else {
		m.initialized = true
	}
	m.met.reconciles.WithLabelValues(result).Inc()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.status.Interface, m.status.Rules = ist, rst
	m.status.LastReconcile = m.now()
	m.status.LastError = ""
	m.status.Counts.Reconciles++
	if err != nil {
		m.status.LastError = err.Error()
		m.status.Counts.ReconcileErrs++
	}
	return err
}

func (m *Manager) countErr(kind string, err error) { m.countSetupErr(kind, false, err) }

// countCheckErr counts an error reading the link back: node-cache's
// interface_check.
func (m *Manager) countCheckErr(kind string, err error) { m.countSetupErr(kind, true, err) }

// CountConfigMapError counts a kube-dns ConfigMap the agent could not
// apply: node-cache's errortype configmap.
func (m *Manager) CountConfigMapError() {
	m.met.setupErrors.WithLabelValues(errTypeConfigMap).Inc()
}

// SetupErrors is the counter of errortype, for tests and the admin API.
func (m *Manager) SetupErrors(errortype string) prometheus.Counter {
	return m.met.setupErrors.WithLabelValues(errortype)
}

func (m *Manager) countSetupErr(kind string, check bool, err error) {
	m.met.errors.WithLabelValues(kind).Inc()
	m.met.setupErrors.WithLabelValues(setupErrorType(kind, check, err)).Inc()
	m.mu.Lock()
	m.status.Counts.Errors.add(kind, 1)
	m.mu.Unlock()
}

// countReadd records n objects put back; additions before the first successful reconcile are the
// initial setup, not re-adds. Caller holds applyMu.
func (m *Manager) countReadd(kind string, n int) {
	if !m.initialized || n <= 0 {
		return
	}
	m.met.readds.WithLabelValues(kind).Add(float64(n))
	m.mu.Lock()
	m.status.Counts.Readds.add(kind, uint64(n))
	m.mu.Unlock()
}

func cloneStatus(s Status) Status {
	s.Interface.Addresses = slices.Clone(s.Interface.Addresses)
	s.Interface.Missing = slices.Clone(s.Interface.Missing)
	s.Interface.IPVSHeld = slices.Clone(s.Interface.IPVSHeld)
	s.Rules.Chains = slices.Clone(s.Rules.Chains)
	return s
}
