//go:build linux

package main

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestRxTimeParses(t *testing.T) {
	ts := unix.NsecToTimespec(1_700_000_000_123_456_789)
	oob := make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(ts))))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	h.Level, h.Type = unix.SOL_SOCKET, unix.SO_TIMESTAMPNS
	h.SetLen(unix.CmsgLen(int(unsafe.Sizeof(ts))))
	*(*unix.Timespec)(unsafe.Pointer(&oob[unix.CmsgLen(0)])) = ts
	if got, ok := rxTime(oob); !ok || got != 1_700_000_000_123_456_789 {
		t.Errorf("rxTime = %d, %v; want 1700000000123456789, true", got, ok)
	}
	h.Type = unix.SO_TIMESTAMP // another message: not read as the arrival time
	if _, ok := rxTime(oob); ok {
		t.Error("rxTime read a time from an SO_TIMESTAMP message")
	}
	if _, ok := rxTime(nil); ok {
		t.Error("rxTime read a time from no control message")
	}
}
