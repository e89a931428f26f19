package iface

import (
	"context"
	"testing"
)

// A nil registerer and a nil logger make a working Manager: metrics kept but
// not registered, logs discarded.
func TestNewWithNilRegistererAndLogger(t *testing.T) {
	ops := &opLog{}
	m, err := NewWithBackends(baseConfig("169.254.20.10"), newFakeLinks(ops), newFakeRules(ops), nil, nil)
	if err != nil {
		t.Fatalf("NewWithBackends: %v", err)
	}
	defer m.Close()
	if err := m.Setup(context.Background()); err != nil {
		t.Fatalf("Setup: %v", err)
	}
	st, err := m.Check(context.Background())
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if !st.Converged() {
		t.Errorf("status: got not converged, want converged")
	}
}
