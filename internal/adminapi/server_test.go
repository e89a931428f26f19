package adminapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/kubezone"
)

// fakeBackend is an Agent that records what the handler asked of it.
type fakeBackend struct {
	mu    sync.Mutex // guards calls
	calls []string
	zone  bool // serves a cluster zone
}

func (f *fakeBackend) called(s string) {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	f.mu.Unlock()
}

func (f *fakeBackend) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeBackend) Status() Status { f.called("status"); return Status{Version: "test"} }
func (f *fakeBackend) Query(_ context.Context, name string, qtype uint16) (Query, error) {
	f.called("query " + name)
	if name == "down.example." {
		return Query{}, errors.New("query: upstreams failing")
	}
	return Query{Name: name, Type: map[uint16]string{1: "A", 28: "AAAA"}[qtype], Answer: []string{}}, nil
}
func (f *fakeBackend) Reload() Reload        { f.called("reload"); return Reload{Generation: 2} }
func (f *fakeBackend) Upstreams() []Upstream { f.called("upstreams"); return nil }
func (f *fakeBackend) CacheStats() cache.Stats {
	f.called("cache stats")
	return cache.Stats{Entries: 1}
}
func (f *fakeBackend) Top(n int) Top                                { f.called("top"); return Top{Clients: make([]ClientRow, 0, n)} }
func (f *fakeBackend) PodByIP(netip.Addr) (kubezone.PodInfo, error) { return kubezone.PodInfo{}, nil }
func (f *fakeBackend) ServeTail(w http.ResponseWriter, _ *http.Request) {
	f.called("tail")
	_, _ = w.Write([]byte(`{"name":"a.org."}` + "\n"))
}
func (f *fakeBackend) CacheDump(filter string, limit int) []cache.EntryInfo {
	f.called("dump " + filter)
	return make([]cache.EntryInfo, min(limit, 2))
}
func (f *fakeBackend) CacheFlush(s FlushScope) Flush {
	f.called("flush")
	return Flush{Flushed: 1, Name: s.Name, Zone: s.Zone, All: s.All}
}
func (f *fakeBackend) ZoneList(string) ([]kubezone.Record, error) { return nil, f.noZone() }
func (f *fakeBackend) ZoneShow(string) ([]kubezone.Record, error) { return nil, f.noZone() }
func (f *fakeBackend) PodByName(ns, name string) (kubezone.PodInfo, error) {
	f.called("pod " + ns + "/" + name)
	return kubezone.PodInfo{Namespace: ns, Name: name}, f.noZone()
}
func (f *fakeBackend) noZone() error {
	if !f.zone {
		return Errorf(http.StatusNotFound, "no zone")
	}
	return nil
}

// serveFake serves NewHandler(f) on a unix socket and returns its client
// and a plain HTTP client of the same socket, for requests Client never
// makes.
func serveFake(t testing.TB, f *fakeBackend) (*Client, func(method, path string) (int, string)) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "admin.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := &http.Server{Handler: NewHandler(f), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c := NewClient(sock)
	raw := func(method, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://nodecache"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: reading the answer: %v", method, path, err)
		}
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	return c, raw
}

// TestHandlerWithClient runs each Client method against the real handler:
// parameters reach the agent normalised and answers come back.
func TestHandlerWithClient(t *testing.T) {
	f := &fakeBackend{zone: true}
	c, _ := serveFake(t, f)
	ctx := context.Background()
	if q, err := c.Query(ctx, "web.demo", "aaaa"); err != nil || q.Name != "web.demo." || q.Type != "AAAA" {
		t.Errorf("Query: got %+v, %v; want web.demo. AAAA", q, err)
	}
	if fl, err := c.CacheFlush(ctx, FlushScope{Zone: "Example.org"}); err != nil || fl.Zone != "Example.org." {
		t.Errorf("CacheFlush: got %+v, %v; want zone Example.org.", fl, err)
	}
	if d, err := c.CacheDump(ctx, "org.", 1); err != nil || len(d) != 1 {
		t.Errorf("CacheDump limit 1: got %d entries, %v; want 1", len(d), err)
	}
	if p, err := c.PodByName(ctx, "demo", "web-1"); err != nil || p.Name != "web-1" {
		t.Errorf("PodByName: got %+v, %v", p, err)
	}
	if _, err := c.Status(ctx); err != nil {
		t.Errorf("Status: %v", err)
	}
	var lines int
	if err := c.Tail(ctx, TailFilter{}, func(TailLine) error { lines++; return nil }); err != nil || lines != 1 {
		t.Errorf("Tail: got %d lines, %v; want 1", lines, err)
	}
	want := []string{"query web.demo.", "flush", "dump org.", "pod demo/web-1", "status", "tail"}
	if got := f.Calls(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("got calls %q, want %q", got, want)
	}
}

// TestHandlerRefuses checks that bad parameters are answered 400 without
// reaching the agent, and that the agent's errors keep their status.
func TestHandlerRefuses(t *testing.T) {
	f := &fakeBackend{}
	c, raw := serveFake(t, f)
	for _, tt := range []struct {
		method, path string
		code         int
		msg          string
	}{
		{"POST", PathCacheFlush, 400, "flush: want exactly one of name=NAME, zone=SUFFIX or all=true"},
		{"POST", PathCacheFlush + "?name=a.org&all=true", 400, "flush: want exactly one"},
		{"POST", PathCacheFlush + "?zone=a..org", 400, `flush: "a..org" is not a domain name`},
		{"GET", PathQuery + "?name=a.org&type=NOPE", 400, "want name=NAME and type=TYPE"},
		{"GET", PathQuery + "?type=A", 400, "want name=NAME and type=TYPE"},
		{"GET", PathQuery + "?name=down.example", 502, "query: upstreams failing"},
		{"GET", PathPod + "?name=web-1", 400, "name: want NAMESPACE/NAME"},
		{"GET", PathPod + "?ip=nope", 400, "want ip=IP or name=NAMESPACE/NAME"},
		{"GET", PathZoneList, 404, "no zone"},
		{"GET", PathStatus[:len(PathStatus)-1], 404, "404 page not found"},
		{"POST", PathStatus, 405, "Method Not Allowed"},
	} {
		code, msg := raw(tt.method, tt.path)
		if code != tt.code || !strings.HasPrefix(msg, tt.msg) {
			t.Errorf("%s %s: got %d %q, want %d %q", tt.method, tt.path, code, msg, tt.code, tt.msg)
		}
	}
	if got := f.Calls(); len(got) != 1 || got[0] != "query down.example." {
		t.Errorf("got calls %q, want only the query that reached the agent", got)
	}
	if _, err := c.ZoneShow(context.Background(), "web.demo"); err == nil || err.Error() != "the agent answered 404 Not Found: no zone" {
		t.Errorf("ZoneShow without a zone: got %v, want the 404", err)
	}
}
