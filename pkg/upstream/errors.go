package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"

	"github.com/nodecache/nodecache/pkg/wire"
)

var (
	// ErrOverloaded is returned by Exchange when Config.MaxInFlight queries
	// are already in flight. It wraps wire.ErrOverloaded, the sentinel the
	// cache and the server edge know: the edge answers REFUSED.
	ErrOverloaded error = errOverloaded{}
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

// errOverloaded is ErrOverloaded: its own message, and wire.ErrOverloaded
// beneath it.
type errOverloaded struct{}

func (errOverloaded) Error() string { return "upstream: too many queries in flight" }
func (errOverloaded) Unwrap() error { return wire.ErrOverloaded }

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

// classify turns a socket error into an AttemptError. A caller that
// cancelled says nothing about the server (kind canceled); a caller's
// deadline that passed without an answer is a timeout like any other, so
// that a short edge deadline still lets silent servers be marked down.
func classify(ctx context.Context, s netip.AddrPort, proto string, err error) *AttemptError {
	kind := kindNetwork
	switch ctxErr := ctx.Err(); {
	case errors.Is(ctxErr, context.Canceled):
		kind, err = kindCanceled, fmt.Errorf("%w (%w)", ctxErr, err)
	case ctxErr != nil:
		kind, err = kindTimeout, fmt.Errorf("%w (%w)", ctxErr, err)
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

// errorKind returns the kind of an *AttemptError, else kindNetwork.
func errorKind(err error) string {
	var ae *AttemptError
	if errors.As(err, &ae) {
		return ae.Kind
	}
	return kindNetwork
}
