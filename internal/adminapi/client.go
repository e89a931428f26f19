package adminapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/kubezone"
)

// Client calls the admin API of a running agent over its unix socket.
type Client struct {
	socket string
	hc     *http.Client // always non-nil; dials socket whatever the URL host
}

// ErrAgentUnreachable is wrapped by every error that means the agent could
// not be reached at all (no socket, nobody listening, not allowed).
var ErrAgentUnreachable = errors.New("agent unreachable")

// AgentError is the one-line error of a failed dial. It unwraps to
// ErrAgentUnreachable and to its cause.
type AgentError struct {
	Socket string
	Cause  error
}

func (e *AgentError) Error() string {
	hint := "is nodecache running?"
	if errors.Is(e.Cause, os.ErrPermission) {
		hint = "the socket is root-only: run as root"
	}
	return fmt.Sprintf("cannot reach the agent at %s: %s (%s)", e.Socket, hint, shortCause(e.Cause))
}

func (e *AgentError) Unwrap() []error { return []error{ErrAgentUnreachable, e.Cause} }

// shortCause trims a dial error to its last two parts: "connect: no such
// file or directory".
func shortCause(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		var se *os.SyscallError
		if errors.As(op.Err, &se) {
			return se.Syscall + ": " + se.Err.Error()
		}
		return op.Err.Error()
	}
	return err.Error()
}

// NewClient returns a client of the agent listening on the unix socket
// path. It dials on each call; nothing needs closing.
func NewClient(socket string) *Client {
	d := net.Dialer{Timeout: 2 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:    2,
		IdleConnTimeout: 30 * time.Second,
	}
	return &Client{socket: socket, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// Status is GET PathStatus.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.do(ctx, http.MethodGet, PathStatus, nil, &st)
	return st, err
}

// Query asks the agent name and typ (A, AAAA, ...) through its own
// resolution path.
func (c *Client) Query(ctx context.Context, name, typ string) (Query, error) {
	var q Query
	err := c.do(ctx, http.MethodGet, PathQuery, url.Values{"name": {name}, "type": {typ}}, &q)
	return q, err
}

// Reload makes the agent apply its config files now. A refused reload is
// no error here: Reload.Error says why.
func (c *Client) Reload(ctx context.Context) (Reload, error) {
	var r Reload
	err := c.do(ctx, http.MethodPost, PathReload, nil, &r)
	return r, err
}

// Upstreams is GET PathUpstreams; never nil on success.
func (c *Client) Upstreams(ctx context.Context) ([]Upstream, error) {
	rows := []Upstream{}
	err := c.do(ctx, http.MethodGet, PathUpstreams, nil, &rows)
	return nonNil(rows), err
}

// CacheStats is GET PathCacheStats.
func (c *Client) CacheStats(ctx context.Context) (cache.Stats, error) {
	var st cache.Stats
	err := c.do(ctx, http.MethodGet, PathCacheStats, nil, &st)
	return st, err
}

// CacheDump returns at most limit cache entries at or below the suffix
// filter ("" for all); nil when there are none.
func (c *Client) CacheDump(ctx context.Context, filter string, limit int) ([]cache.EntryInfo, error) {
	var entries []cache.EntryInfo
	q := url.Values{"filter": {filter}, "limit": {strconv.Itoa(limit)}}
	err := c.do(ctx, http.MethodGet, PathCacheDump, q, &entries)
	return entries, err
}

// CacheFlush removes the entries s names; the agent refuses a scope that
// does not set exactly one field.
func (c *Client) CacheFlush(ctx context.Context, s FlushScope) (Flush, error) {
	q := url.Values{}
	if s.Name != "" {
		q.Set("name", s.Name)
	}
	if s.Zone != "" {
		q.Set("zone", s.Zone)
	}
	if s.All {
		q.Set("all", "true")
	}
	var f Flush
	err := c.do(ctx, http.MethodPost, PathCacheFlush, q, &f)
	return f, err
}

// ZoneList returns the cluster zone's records, of namespace ns only unless
// it is ""; never nil on success.
func (c *Client) ZoneList(ctx context.Context, ns string) ([]kubezone.Record, error) {
	recs := []kubezone.Record{}
	err := c.do(ctx, http.MethodGet, PathZoneList, url.Values{"namespace": {ns}}, &recs)
	return nonNil(recs), err
}

// ZoneShow returns the records owned by name or names below it; name may
// be short ("web.demo") or an IP address. Never nil on success.
func (c *Client) ZoneShow(ctx context.Context, name string) ([]kubezone.Record, error) {
	recs := []kubezone.Record{}
	err := c.do(ctx, http.MethodGet, PathZoneShow, url.Values{"name": {name}}, &recs)
	return nonNil(recs), err
}

// PodByName returns the node's pod namespace/name.
func (c *Client) PodByName(ctx context.Context, ns, name string) (kubezone.PodInfo, error) {
	var p kubezone.PodInfo
	err := c.do(ctx, http.MethodGet, PathPod, url.Values{"name": {ns + "/" + name}}, &p)
	return p, err
}

// Top returns the cumulative counters of the n busiest clients and of the
// agent.
func (c *Client) Top(ctx context.Context, n int) (Top, error) {
	var t Top
	err := c.do(ctx, http.MethodGet, PathTop, url.Values{"n": {strconv.Itoa(n)}}, &t)
	return t, err
}

// Tail calls fn with each query f selects as the agent answers it, until
// fn fails, the agent stops or ctx ends (then it returns ctx.Err()).
// Unlike the other calls it has no overall timeout.
func (c *Client) Tail(ctx context.Context, f TailFilter, fn func(TailLine) error) error {
	q := url.Values{}
	for k, v := range map[string]string{"pod": f.Pod, "namespace": f.Namespace, "suffix": f.Suffix, "rcode": f.Rcode} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.MinLatency > 0 {
		q.Set("min_latency", f.MinLatency.String())
	}
	return c.stream(ctx, PathTail, q, func(line []byte) error {
		var l TailLine
		if err := json.Unmarshal(line, &l); err != nil {
			return fmt.Errorf("decoding the agent's tail line: %w", err)
		}
		return fn(l)
	})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// send sends method path?q and returns the answer of a 200; hc sets the
// timeout.
func (c *Client) send(ctx context.Context, hc *http.Client, method, path string, q url.Values) (*http.Response, error) {
	u := url.URL{Scheme: "http", Host: "nodecache", Path: path, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("building request %s: %w", path, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if isDialError(err) {
			return nil, &AgentError{Socket: c.socket, Cause: err}
		}
		return nil, fmt.Errorf("calling the agent (%s %s): %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("the agent answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return resp, nil
}

// do decodes the JSON answer of method path?q into out.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, out any) error {
	resp, err := c.send(ctx, c.hc, method, path, q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading the agent's answer to %s: %w", path, err)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decoding the agent's answer to %s: %w", path, err)
	}
	return nil
}

// stream calls fn with each line of the answer to GET path?q until the
// answer ends or ctx does.
func (c *Client) stream(ctx context.Context, path string, q url.Values, fn func(line []byte) error) error {
	hc := &http.Client{Transport: c.hc.Transport} // no Timeout: a stream lasts
	resp, err := c.send(ctx, hc, http.MethodGet, path, q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if err := fn(sc.Bytes()); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the agent's stream: %w", err)
	}
	return nil
}

// isDialError reports whether err happened before a connection existed.
func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrPermission)
}
