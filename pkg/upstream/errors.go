package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
)

var (
	// ErrOverloaded is returned by Exchange when Config.MaxInFlight queries
	// are already in flight. The server edge answers REFUSED.
	ErrOverloaded = errors.New("upstream: too many queries in flight")
	// ErrNoAnswer is returned by Exchange when no server gave a valid reply
	// before the deadline. It wraps the last cause, usually an
	// *AttemptError. The server edge answers SERVFAIL.
	ErrNoAnswer = errors.New("upstream: no answer")
	// ErrClosed is returned by Exchange after Close.
	ErrClosed = errors.New("upstream: forwarder closed")
	// ErrBadRequest is returned by Exchange for a nil message or one that
	// does not carry exactly one question.
	ErrBadRequest = errors.New("upstream: request must carry exactly one question")
)

// AttemptError describes one failed attempt at one server.
type AttemptError struct {
	Server netip.AddrPort
	Proto  string // "udp" or "tcp"
	Kind   string // one of the nodecache_upstream_errors_total kinds
	Err    error  // the underlying cause; may be nil for Kind "refused"
}

func (e *AttemptError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("querying %s over %s: %s", e.Server, e.Proto, e.Kind)
	}
	return fmt.Sprintf("querying %s over %s: %s: %v", e.Server, e.Proto, e.Kind, e.Err)
}

func (e *AttemptError) Unwrap() error { return e.Err }

// healthFailure reports whether an attempt that failed with kind counts
// towards marking its server down. A REFUSED answer proves the server is
// alive; a cancelled caller says nothing about the server.
func healthFailure(kind string) bool {
	switch kind {
	case kindTimeout, kindConnRefused, kindNetwork:
		return true
	}
	return false
}

// classify turns a socket error into an AttemptError, telling a caller's
// cancellation from a timeout of the attempt itself.
func classify(ctx context.Context, s netip.AddrPort, proto string, err error) *AttemptError {
	kind := kindNetwork
	switch {
	case ctx.Err() != nil:
		kind, err = kindCanceled, fmt.Errorf("%w (%w)", ctx.Err(), err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		kind = kindTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		kind = kindConnRefused
	default:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			kind = kindTimeout
		}
	}
	return &AttemptError{Server: s, Proto: proto, Kind: kind, Err: err}
}

// staleConn reports whether err is what a reused TCP connection returns
// when the server closed it while it sat idle in the pool.
func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// errorKind returns the kind of an *AttemptError, else kindNetwork.
func errorKind(err error) string {
	var ae *AttemptError
	if errors.As(err, &ae) {
		return ae.Kind
	}
	return kindNetwork
}
