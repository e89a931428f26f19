//go:build !linux

package main

import (
	"errors"
	"net"
)

func enableRxTime(*net.UDPConn) error {
	return errors.New("kernel receive times (SO_TIMESTAMPNS) need Linux: use -rx-time=read")
}

func rxTime([]byte) (int64, bool) { return 0, false }
