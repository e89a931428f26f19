package agent

import (
	"net"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeConn is a connection from ip that records its closing.
type fakeConn struct {
	net.Conn
	ip     net.IP
	closed bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: c.ip, Port: 40000} }
func (c *fakeConn) Close() error         { c.closed = true; return nil }

func TestConnGuard(t *testing.T) {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "refused"}, []string{"reason"})
	g := newConnGuard(4, 2, refused)
	a1, a2, a3 := &fakeConn{ip: net.IPv4(10, 0, 0, 1)}, &fakeConn{ip: net.IPv4(10, 0, 0, 1)}, &fakeConn{ip: net.IPv4(10, 0, 0, 1)}
	if !g.admit(a1) || !g.admit(a2) {
		t.Fatal("first two connections of a client: refused, want admitted")
	}
	g.connState(a1, http.StateActive)
	g.connState(a2, http.StateActive)
	if g.admit(a3) {
		t.Error("third connection of a client over its cap of 2, both busy: admitted, want refused")
	}
	g.connState(a1, http.StateIdle)
	g.connState(a2, http.StateIdle)
	b1, b2 := &fakeConn{ip: net.IPv4(10, 0, 0, 2)}, &fakeConn{ip: net.IPv4(10, 0, 0, 2)}
	if !g.admit(b1) || !g.admit(b2) {
		t.Fatal("another client's connections: refused, want admitted")
	}
	// Total cap reached. a1 and b1 are busy; a2 went idle before b2.
	g.connState(a1, http.StateActive)
	g.connState(b1, http.StateActive)
	g.connState(a2, http.StateIdle)
	g.connState(b2, http.StateIdle)
	c1 := &fakeConn{ip: net.IPv4(10, 0, 0, 3)}
	if !g.admit(c1) {
		t.Fatal("a new client at the total cap with idle connections: refused, want one evicted")
	}
	if !a2.closed || b2.closed || a1.closed {
		t.Errorf("evicted: got a2=%v b2=%v a1=%v closed, want only a2 (idle longest)", a2.closed, b2.closed, a1.closed)
	}
	g.connState(b2, http.StateActive)
	g.connState(c1, http.StateActive)
	if g.admit(&fakeConn{ip: net.IPv4(10, 0, 0, 4)}) {
		t.Error("at the total cap with every connection busy: admitted, want refused")
	}
	g.connState(a1, http.StateClosed)
	if !g.admit(&fakeConn{ip: net.IPv4(10, 0, 0, 4)}) || g.open() != 4 {
		t.Errorf("after a connection closed: got %d open, want the newcomer admitted and 4 open", g.open())
	}
	for reason, want := range map[string]float64{"per_client": 1, "evicted": 1, "total": 1} {
		if got := testutil.ToFloat64(refused.WithLabelValues(reason)); got != want {
			t.Errorf("refused{%s}: got %v, want %v", reason, got, want)
		}
	}
}

// TestConnGuardPerClientEvictsIdle: a client at its cap whose connections
// are idle keep-alives gets its next one served: the longest-idle of its
// own goes, another client's idle connection does not.
func TestConnGuardPerClientEvictsIdle(t *testing.T) {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "refused"}, []string{"reason"})
	g := newConnGuard(8, 2, refused)
	other := &fakeConn{ip: net.IPv4(10, 0, 0, 9)}
	a1, a2 := &fakeConn{ip: net.IPv4(10, 0, 0, 1)}, &fakeConn{ip: net.IPv4(10, 0, 0, 1)}
	for _, c := range []*fakeConn{other, a1, a2} {
		if !g.admit(c) {
			t.Fatalf("connection from %v under every cap: refused", c.ip)
		}
	}
	g.connState(a1, http.StateActive)
	g.connState(a1, http.StateIdle) // a1 idle since now, a2 since its accept: a2 is the longest idle
	a3 := &fakeConn{ip: net.IPv4(10, 0, 0, 1)}
	if !g.admit(a3) {
		t.Fatal("a client at its cap with idle keep-alives: its new connection refused, want one of its own closed")
	}
	if !a2.closed || a1.closed || other.closed {
		t.Errorf("closed: a2=%v a1=%v other=%v, want only a2 (that client's longest idle)", a2.closed, a1.closed, other.closed)
	}
	if got := testutil.ToFloat64(refused.WithLabelValues("per_client_evicted")); got != 1 {
		t.Errorf("refused{per_client_evicted}: got %v, want 1", got)
	}
	if g.open() != 3 {
		t.Errorf("open: got %d, want 3", g.open())
	}
}
