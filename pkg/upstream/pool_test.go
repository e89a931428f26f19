package upstream

import (
	"net"
	"testing"
	"time"
)

// fakeConn is a net.Conn that only records Close.
type fakeConn struct {
	net.Conn // nil: any other method panics
	closed   bool
}

func (c *fakeConn) Close() error { c.closed = true; return nil }

func TestConnPool(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const idle = 10 * time.Second
	// Each put below expires idle after it, as the TCP pool's do, except
	// where a case says otherwise.
	tests := []struct {
		name       string
		run        func(p *tcpPool, c []net.Conn) net.Conn // returns what get gave, if it matters
		wantGot    int                                     // index into c, -1 for nil
		wantSize   int
		wantClosed []int
	}{
		{
			name:     "empty pool gives nil",
			run:      func(p *tcpPool, _ []net.Conn) net.Conn { return get(t, p, t0) },
			wantGot:  -1,
			wantSize: 0,
		},
		{
			name: "most recent first",
			run: func(p *tcpPool, c []net.Conn) net.Conn {
				p.put(c[0], t0.Add(idle))
				p.put(c[1], t0.Add(time.Second+idle))
				return get(t, p, t0.Add(2*time.Second))
			},
			wantGot:  1,
			wantSize: 1,
		},
		{
			name: "expired newest closes all",
			run: func(p *tcpPool, c []net.Conn) net.Conn {
				p.put(c[0], t0.Add(idle))
				p.put(c[1], t0.Add(time.Second+idle))
				return get(t, p, t0.Add(time.Second+idle))
			},
			wantGot:    -1,
			wantSize:   0,
			wantClosed: []int{0, 1},
		},
		{
			// UDP sockets expire by age, so the newest put may expire first.
			name: "expired newest is skipped for an older live one",
			run: func(p *tcpPool, c []net.Conn) net.Conn {
				p.put(c[0], t0.Add(idle))
				p.put(c[1], t0.Add(time.Second))
				return get(t, p, t0.Add(2*time.Second))
			},
			wantGot:    0,
			wantSize:   0,
			wantClosed: []int{1},
		},
		{
			name: "full pool evicts oldest",
			run: func(p *tcpPool, c []net.Conn) net.Conn {
				p.put(c[0], t0.Add(idle))
				p.put(c[1], t0.Add(idle))
				p.put(c[2], t0.Add(idle))
				return nil
			},
			wantGot:    -1,
			wantSize:   2,
			wantClosed: []int{0},
		},
		{
			name: "sweep closes only expired",
			run: func(p *tcpPool, c []net.Conn) net.Conn {
				p.put(c[0], t0.Add(5*time.Second+idle))
				p.put(c[1], t0.Add(idle))
				if got := p.sweep(t0.Add(idle)); got != 1 {
					t.Errorf("sweep: got %d closed, want 1", got)
				}
				return get(t, p, t0.Add(idle))
			},
			wantGot:    0,
			wantSize:   0,
			wantClosed: []int{1},
		},
		{
			name: "close closes idle and later puts",
			run: func(p *tcpPool, c []net.Conn) net.Conn {
				p.put(c[0], t0.Add(idle))
				p.close()
				p.close()
				p.put(c[1], t0.Add(idle))
				return get(t, p, t0)
			},
			wantGot:    -1,
			wantSize:   0,
			wantClosed: []int{0, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newConnPool[net.Conn](2)
			fakes := []*fakeConn{{}, {}, {}}
			conns := []net.Conn{fakes[0], fakes[1], fakes[2]}
			got := tt.run(p, conns)
			var want net.Conn
			if tt.wantGot >= 0 {
				want = conns[tt.wantGot]
			}
			if got != want {
				t.Errorf("get: got %v, want conn %d", got, tt.wantGot)
			}
			if size := p.size(); size != tt.wantSize {
				t.Errorf("size: got %d, want %d", size, tt.wantSize)
			}
			closed := map[int]bool{}
			for _, i := range tt.wantClosed {
				closed[i] = true
			}
			for i, c := range fakes {
				if got := c.closed; got != closed[i] {
					t.Errorf("conn %d closed: got %v, want %v", i, got, closed[i])
				}
			}
		})
	}
}

// get is p.get with nil for none, checking the two results agree.
func get(tb testing.TB, p *tcpPool, now time.Time) net.Conn {
	tb.Helper()
	c, ok := p.get(now)
	if ok != (c != nil) {
		tb.Errorf("get: got conn %v with ok %v", c, ok)
	}
	return c
}
