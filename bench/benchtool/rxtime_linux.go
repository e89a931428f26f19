//go:build linux

package main

import (
	"fmt"
	"net"
	"unsafe"

	"golang.org/x/sys/unix"
)

// enableRxTime asks the kernel to stamp each datagram c receives with the
// time it arrived (SO_TIMESTAMPNS), read back by rxTime.
func enableRxTime(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("SO_TIMESTAMPNS: %w", serr)
	}
	return nil
}

// rxTime returns the arrival time (Unix nanoseconds) in a datagram's
// control messages; ok is false when they hold none.
func rxTime(oob []byte) (ns int64, ok bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS &&
			len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := *(*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return ts.Nano(), true
		}
	}
	return 0, false
}
