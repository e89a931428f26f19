//go:build !linux

package server

import (
	"net"
	"net/netip"
)

// serveUDPBatched reports that batching is unavailable off Linux.
func (s *Server) serveUDPBatched(*net.UDPConn) bool { return false }

// lateQueue is Linux's batching of slow-path replies; elsewhere there is
// none (replyQueue.lateReplies returns nil) and each reply is sent alone.
type lateQueue struct{}

func (*lateQueue) offer([]byte, netip.AddrPort) (queued, flush bool) { return false, false }
func (*lateQueue) flushQueued() error                                { return nil }
