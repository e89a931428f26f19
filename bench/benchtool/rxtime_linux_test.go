//go:build linux

package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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

// TestRunLatencyKernelRx: with the kernel's arrival times every answered
// reply still gets a latency, within the timeout, and the result says
// which times it used.
func TestRunLatencyKernelRx(t *testing.T) {
	var seen atomic.Int64
	addr := startServer(t, &seen)
	qs, err := readQueries(strings.NewReader("a.example. A\nb.example. A\n"), 10)
	if err != nil {
		t.Fatal(err)
	}
	cfg := latencyConfig{Server: addr, Rate: 400, Duration: 250 * time.Millisecond, Timeout: 500 * time.Millisecond, Sockets: 2, KernelRx: true}
	res, err := runLatency(context.Background(), cfg, qs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 100 || res.Answered != 100 || res.Unstamped != 0 {
		t.Errorf("got %d sent, %d answered, %d without the kernel's time; want 100, 100 and 0", res.Sent, res.Answered, res.Unstamped)
	}
	for _, d := range res.Latencies {
		if d <= 0 || d > cfg.Timeout {
			t.Fatalf("latency %v: want one within (0, %v]", d, cfg.Timeout)
		}
	}
	if got := res.format(); !strings.Contains(got, "rx_time=kernel unstamped=0") {
		t.Errorf("format() = %q, want rx_time=kernel unstamped=0", got)
	}
}
