//go:build !linux

package iface

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// New fails outside Linux: there is no rtnetlink or iptables to act on. Use NewWithBackends.
func New(cfg Config, reg prometheus.Registerer, log *slog.Logger) (*Manager, error) {
	return nil, errors.New("iface: interface and iptables setup need Linux")
}

// Cleanup fails outside Linux, like New.
func Cleanup(ctx context.Context, cfg Config, log *slog.Logger) error {
	return errors.New("iface: interface and iptables cleanup need Linux")
}
