package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/kubezone"
)

// served is one request a fake agent saw.
type served struct{ method, path, query string }

// fakeAgent serves h on a unix socket in a temporary directory and returns
// a client of it and a function that returns the requests it saw so far.
func fakeAgent(t testing.TB, h http.HandlerFunc) (*Client, func() []served) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "admin.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var mu sync.Mutex // guards seen
	var seen []served
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, served{r.Method, r.URL.Path, r.URL.RawQuery})
		mu.Unlock()
		h(w, r)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return NewClient(sock), func() []served {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// TestClientCalls checks that each method asks its path with its
// parameters and decodes the answer.
func TestClientCalls(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		call func(c *Client) (any, error)
		want served
		body any
	}{
		{"Status", func(c *Client) (any, error) { return c.Status(ctx) }, served{"GET", PathStatus, ""}, Status{Version: "v1", ConfigGeneration: 3}},
		{"Query", func(c *Client) (any, error) { return c.Query(ctx, "web.demo", "AAAA") }, served{"GET", PathQuery, "name=web.demo&type=AAAA"}, Query{Name: "web.demo.", Answer: []string{}}},
		{"Reload", func(c *Client) (any, error) { return c.Reload(ctx) }, served{"POST", PathReload, ""}, Reload{Generation: 2, Error: "bad"}},
		{"Upstreams", func(c *Client) (any, error) { return c.Upstreams(ctx) }, served{"GET", PathUpstreams, ""}, []Upstream{{Addr: "127.0.0.1:53", Up: true}}},
		{"CacheStats", func(c *Client) (any, error) { return c.CacheStats(ctx) }, served{"GET", PathCacheStats, ""}, cache.Stats{Entries: 4}},
		{"CacheDump", func(c *Client) (any, error) { return c.CacheDump(ctx, "org.", 7) }, served{"GET", PathCacheDump, "filter=org.&limit=7"}, []cache.EntryInfo{{Name: "a.org."}}},
		{"CacheFlushName", func(c *Client) (any, error) { return c.CacheFlush(ctx, FlushScope{Name: "a.org"}) }, served{"POST", PathCacheFlush, "name=a.org"}, Flush{Flushed: 1, Name: "a.org."}},
		{"CacheFlushZone", func(c *Client) (any, error) { return c.CacheFlush(ctx, FlushScope{Zone: "org"}) }, served{"POST", PathCacheFlush, "zone=org"}, Flush{Flushed: 2, Zone: "org."}},
		{"CacheFlushAll", func(c *Client) (any, error) { return c.CacheFlush(ctx, FlushScope{All: true}) }, served{"POST", PathCacheFlush, "all=true"}, Flush{Flushed: 3, All: true}},
		{"ZoneList", func(c *Client) (any, error) { return c.ZoneList(ctx, "demo") }, served{"GET", PathZoneList, "namespace=demo"}, []kubezone.Record{{Name: "web.demo.svc.cluster.local.", Type: "A"}}},
		{"ZoneShow", func(c *Client) (any, error) { return c.ZoneShow(ctx, "web.demo") }, served{"GET", PathZoneShow, "name=web.demo"}, []kubezone.Record{{Name: "web.demo.svc.cluster.local.", Type: "A"}}},
		{"PodByName", func(c *Client) (any, error) { return c.PodByName(ctx, "demo", "web-1") }, served{"GET", PathPod, "name=demo%2Fweb-1"}, kubezone.PodInfo{Namespace: "demo", Name: "web-1"}},
		{"Top", func(c *Client) (any, error) { return c.Top(ctx, 5) }, served{"GET", PathTop, "n=5"}, Top{Clients: []ClientRow{{IP: "10.0.0.1", Queries: 9}}, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, seen := fakeAgent(t, func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(tt.body) })
			got, err := tt.call(c)
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if s := seen(); len(s) != 1 || s[0] != tt.want {
				t.Errorf("got requests %+v, want [%+v]", s, tt.want)
			}
			if !reflect.DeepEqual(got, tt.body) {
				t.Errorf("got %+v, want %+v", got, tt.body)
			}
		})
	}
}

// TestClientEmptyLists checks that the list calls give [] for an empty
// zone or upstream list (the agent encodes null), so `-o json` prints [].
func TestClientEmptyLists(t *testing.T) {
	c, _ := fakeAgent(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("null\n")) })
	ups, err := c.Upstreams(context.Background())
	if err != nil || ups == nil {
		t.Errorf("Upstreams: got %#v, %v; want an empty list", ups, err)
	}
	recs, err := c.ZoneList(context.Background(), "")
	if err != nil || recs == nil {
		t.Errorf("ZoneList: got %#v, %v; want an empty list", recs, err)
	}
}

// TestClientTail checks the filter's parameters and that each streamed
// line reaches fn in order.
func TestClientTail(t *testing.T) {
	lines := []TailLine{{Name: "a.org.", Rcode: "NOERROR"}, {Name: "b.org.", Rcode: "NXDOMAIN", Dropped: 2}}
	c, seen := fakeAgent(t, func(w http.ResponseWriter, _ *http.Request) {
		enc := json.NewEncoder(w)
		for _, l := range lines {
			_ = enc.Encode(l)
		}
	})
	var got []TailLine
	f := TailFilter{Pod: "demo/web-1", Suffix: "org", Rcode: "NXDOMAIN", MinLatency: 50 * time.Millisecond}
	if err := c.Tail(context.Background(), f, func(l TailLine) error { got = append(got, l); return nil }); err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	if !reflect.DeepEqual(got, lines) {
		t.Errorf("got lines %+v, want %+v", got, lines)
	}
	want := served{"GET", PathTail, "min_latency=50ms&pod=demo%2Fweb-1&rcode=NXDOMAIN&suffix=org"}
	if s := seen(); len(s) != 1 || s[0] != want {
		t.Errorf("got requests %+v, want [%+v]", s, want)
	}
}

// TestClientErrors checks the two ways a call fails: nobody listening
// (ErrAgentUnreachable) and an agent that refuses (its message).
func TestClientErrors(t *testing.T) {
	c := NewClient(filepath.Join(t.TempDir(), "absent.sock"))
	_, err := c.Status(context.Background())
	var ae *AgentError
	if !errors.Is(err, ErrAgentUnreachable) || !errors.As(err, &ae) {
		t.Errorf("absent socket: got %v, want an AgentError wrapping ErrAgentUnreachable", err)
	}
	err = c.Tail(context.Background(), TailFilter{}, func(TailLine) error { return nil })
	if !errors.Is(err, ErrAgentUnreachable) {
		t.Errorf("absent socket, Tail: got %v, want ErrAgentUnreachable", err)
	}
	c, _ = fakeAgent(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "this agent serves no cluster zone", http.StatusNotFound)
	})
	_, err = c.ZoneList(context.Background(), "")
	if err == nil || errors.Is(err, ErrAgentUnreachable) || err.Error() != "the agent answered 404 Not Found: this agent serves no cluster zone" {
		t.Errorf("404: got %v, want the agent's message", err)
	}
}
