package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
)

// adminClient calls the admin API of a running agent over its unix socket.
type adminClient struct {
	socket string
	hc     *http.Client // always non-nil; dials socket whatever the URL host
}

// ErrAgentUnreachable is wrapped by every error that means the agent could
// not be reached at all (no socket, nobody listening, not allowed).
var ErrAgentUnreachable = errors.New("agent unreachable")

// agentError is the one-line error of a failed dial.
type agentError struct {
	socket string
	cause  error
}

func (e *agentError) Error() string {
	hint := "is nodecache running?"
	if errors.Is(e.cause, os.ErrPermission) {
		hint = "the socket is root-only: run as root"
	}
	return fmt.Sprintf("cannot reach the agent at %s: %s (%s)", e.socket, hint, shortCause(e.cause))
}

func (e *agentError) Unwrap() []error { return []error{ErrAgentUnreachable, e.cause} }

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

func newAdminClient(socket string) *adminClient {
	d := net.Dialer{Timeout: 2 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:    2,
		IdleConnTimeout: 30 * time.Second,
	}
	return &adminClient{socket: socket, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// get decodes the JSON answer of GET path?q into out.
func (c *adminClient) get(ctx context.Context, path string, q url.Values, out any) error {
	return c.do(ctx, http.MethodGet, path, q, out)
}

// post decodes the JSON answer of POST path?q into out.
func (c *adminClient) post(ctx context.Context, path string, q url.Values, out any) error {
	return c.do(ctx, http.MethodPost, path, q, out)
}

func (c *adminClient) do(ctx context.Context, method, path string, q url.Values, out any) error {
	u := url.URL{Scheme: "http", Host: "nodecache", Path: path, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return fmt.Errorf("building request %s: %w", path, err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if isDialError(err) {
			return &agentError{socket: c.socket, cause: err}
		}
		return fmt.Errorf("calling the agent (%s %s): %w", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading the agent's answer to %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the agent answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decoding the agent's answer to %s: %w", path, err)
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
