//go:build !linux

package iface

import (
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// New fails outside Linux: there is no rtnetlink or iptables to act on. Use NewWithBackends.
func New(cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Manager, error) {
	return nil, errors.New("iface: interface and iptables setup need Linux")
}
