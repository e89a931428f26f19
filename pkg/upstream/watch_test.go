package upstream

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestUDPWatchKeptAcrossQueries: the queries of one socket under one
// long-lived context share one watch, which still unblocks a read when the
// context ends, and leaves the socket refused for any later query.
func TestUDPWatchKeptAcrossQueries(t *testing.T) {
	silent, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	u, err := dialUDP(silent.LocalAddr().(*net.UDPAddr), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	for i := range 3 {
		if err := u.conn.SetDeadline(time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if !u.watch(ctx) {
			t.Fatalf("query %d: watch refused a live context", i)
		}
		if i == 0 {
			continue
		}
		if u.watched != ctx.Done() || u.unwatch == nil {
			t.Fatalf("query %d: the watch of the first query is gone", i)
		}
	}
	read := make(chan error, 1)
	go func() {
		_, err := u.conn.Read(make([]byte, 512))
		read <- err
	}()
	cancel()
	if err := <-read; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the context ended: got %v, want a deadline error (the read unblocked)", err)
	}
	if u.watch(ctx) {
		t.Errorf("watch under the ended context: got true, want false")
	}
	if u.watch(context.Background()) {
		t.Errorf("watch under another context after the first fired: got true, want false")
	}
}

// TestUDPWatchEndedOnIdleSocket: a context that ends while its socket idles
// in the pool costs the next query nothing: the socket is dropped and the
// query, under another context, is answered.
func TestUDPWatchEndedOnIdleSocket(t *testing.T) {
	ts, _ := startPortServer(t)
	f, _ := newTestForwarder(t, testConfig(ts), hooks{})
	s := f.all[0]
	ctx, cancel := context.WithCancel(context.Background())
	if _, _, err := exchange(ctx, f, query("a.example.", dns.TypeA)); err != nil {
		t.Fatal(err)
	}
	first := pooledUDP(t, s)
	if first.unwatch == nil {
		t.Fatalf("pooled socket: got no watch, want the query's kept")
	}
	cancel()
	if _, _, err := exchange(ctx, f, query("b.example.", dns.TypeA)); err == nil {
		t.Errorf("query under the ended context: got an answer, want an error")
	}
	if resp, _, err := exchange(context.Background(), f, query("c.example.", dns.TypeA)); err != nil || len(resp.Answer) != 1 {
		t.Fatalf("query under another context: got %v, %v; want an answer", resp, err)
	}
	checkClosed(t, first)
}
