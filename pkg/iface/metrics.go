package iface

import (
	"errors"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodecache/nodecache/pkg/corednsmetrics"
)

// Label values of the kind label.
const (
	kindLink    = "link"
	kindAddress = "address"
	kindRule    = "rule"
	kindJump    = "jump"
	kindWatch   = "watch" // errors only: the netlink subscription failed
)

type metrics struct {
	reconciles *prometheus.CounterVec // result = ok | error
	readds     *prometheus.CounterVec // kind = link | address | rule | jump
	errors     *prometheus.CounterVec // kind = link | address | rule | jump | watch
	rules      prometheus.Gauge
	ipvsHeld   prometheus.Gauge // local IPs kube-ipvs0 also holds
	// setupErrors is node-local-dns's coredns_nodecache_setup_errors_total
	// {errortype}, which its alerts and dashboards use, with node-cache's
	// label values (kubernetes/dns cmd/node-cache/app): see setupErrorType.
	setupErrors *prometheus.CounterVec
}

// node-cache's errortype values, all created at 0 as node-cache does.
const (
	errTypeIPTables       = "iptables"
	errTypeIPTablesLock   = "iptables_lock"
	errTypeInterfaceAdd   = "interface_add"
	errTypeInterfaceCheck = "interface_check"
	errTypeConfigMap      = "configmap"
)

// setupErrorType maps an error of kind to node-cache's errortype: rule
// and jump errors are iptables, or iptables_lock when the xtables lock
// was held (node-cache tells it by the same words in the error); creating
// the link, setting it up and adding addresses are interface_add; reading
// the link back (check) and a failed netlink watch are interface_check.
func setupErrorType(kind string, check bool, err error) string {
	switch {
	case kind == kindRule || kind == kindJump:
		if err != nil && strings.Contains(err.Error(), "holding the xtables lock") {
			return errTypeIPTablesLock
		}
		return errTypeIPTables
	case check || kind == kindWatch:
		return errTypeInterfaceCheck
	}
	return errTypeInterfaceAdd
}

// newMetrics registers the collectors on reg; reg may be nil (metrics are then kept but not exported).
// A collector already registered by an earlier Manager on the same registry is reused.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodecache_iface_reconciles_total",
			Help: "Reconciles of the interface and rules, by result (ok, error).",
		}, []string{"result"}),
		readds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodecache_iface_readds_total",
			Help: "Objects found missing after the first Setup and put back, by kind (link, address, rule, jump).",
		}, []string{"kind"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodecache_iface_errors_total",
			Help: "Failed netlink or iptables operations, by kind (link, address, rule, jump, watch).",
		}, []string{"kind"}),
		rules: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodecache_iface_rules",
			Help: "Our iptables rules (including jumps) present after the last rule reconcile, all families.",
		}),
		ipvsHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nodecache_iface_ipvs_held_ips",
			Help: "Local IPs that kube-proxy's kube-ipvs0 link also holds (IPVS mode): queries to them reach the Service's endpoints, not this agent.",
		}),
		setupErrors: corednsmetrics.SetupErrors(),
	}
	if reg != nil {
		var err error
		if m.reconciles, err = register(reg, m.reconciles); err != nil {
			return nil, err
		}
		if m.readds, err = register(reg, m.readds); err != nil {
			return nil, err
		}
		if m.errors, err = register(reg, m.errors); err != nil {
			return nil, err
		}
		if m.rules, err = register(reg, m.rules); err != nil {
			return nil, err
		}
		if m.ipvsHeld, err = register(reg, m.ipvsHeld); err != nil {
			return nil, err
		}
		if m.setupErrors, err = register(reg, m.setupErrors); err != nil {
			return nil, err
		}
	}
	for _, r := range []string{"ok", "error"} {
		m.reconciles.WithLabelValues(r)
	}
	for _, k := range []string{kindLink, kindAddress, kindRule, kindJump} {
		m.readds.WithLabelValues(k)
		m.errors.WithLabelValues(k)
	}
	m.errors.WithLabelValues(kindWatch)
	for _, t := range []string{errTypeIPTables, errTypeIPTablesLock, errTypeInterfaceAdd, errTypeInterfaceCheck, errTypeConfigMap} {
		m.setupErrors.WithLabelValues(t)
	}
	return m, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}
