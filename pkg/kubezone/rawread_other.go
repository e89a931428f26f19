//go:build !linux

package kubezone

import "net"

// withRawReads returns c as it is: raw reads are Linux only.
func withRawReads(c net.Conn) net.Conn { return c }
