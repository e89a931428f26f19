//go:build !linux

package server

import "net"

// serveUDPBatched reports that batching is unavailable off Linux.
func (s *Server) serveUDPBatched(*net.UDPConn) bool { return false }
