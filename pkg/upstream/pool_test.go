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

func TestTCPPool(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const idle = 10 * time.Second
	tests := []struct {
		name       string
		run        func(p *tcpPool, c []net.Conn) net.Conn // returns what get gave, if it matters
		wantGot    int                                     // index into c, -1 for nil
		wantSize   int
		wantClosed []int
	}{
		{
			name:     "empty pool gives nil",
			run:      func(p *tcpPool, _ []net.Conn) net.Conn { return p.get(t0) },
			wantGot:  -1,
			wantSize: 0,
		},
		{
			name: "most recent first",
			run: func(p *tcpPool, c []net.Conn) net.Conn {
				p.put(c[0], t0)
				p.put(c[1], t0.Add(time.Second))
				return p.get(t0.Add(2 * time.Second))
			},
			wantGot:  1,
			wantSize: 1,
		},
		{
			name: "expired newest closes all",
			run: func(p *tcpPool, c []net.Conn) net.Conn {
				p.put(c[0], t0)
				p.put(c[1], t0.Add(time.Second))
				return p.get(t0.Add(time.Second + idle))
			},
			wantGot:    -1,
			wantSize:   0,
			wantClosed: []int{0, 1},
		},
		{
			name: "full pool evicts oldest",
			run: func(p *tcpPool, c []net.Conn) net.Conn {
				p.put(c[0], t0)
				p.put(c[1], t0)
				p.put(c[2], t0)
				return nil
			},
			wantGot:    -1,
			wantSize:   2,
			wantClosed: []int{0},
		},
		{
			name: "sweep closes only expired",
			run: func(p *tcpPool, c []net.Conn) net.Conn {
				p.put(c[0], t0)
				p.put(c[1], t0.Add(5*time.Second))
				if got := p.sweep(t0.Add(idle)); got != 1 {
					t.Errorf("sweep: got %d closed, want 1", got)
				}
				return p.get(t0.Add(idle))
			},
			wantGot:    1,
			wantSize:   0,
			wantClosed: []int{0},
		},
		{
			name: "close closes idle and later puts",
			run: func(p *tcpPool, c []net.Conn) net.Conn {
				p.put(c[0], t0)
				p.close()
				p.close()
				p.put(c[1], t0)
				return p.get(t0)
			},
			wantGot:    -1,
			wantSize:   0,
			wantClosed: []int{0, 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTCPPool(2, idle)
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
