// Package testnet hands tests loopback ports for servers they start in
// another process or behind a flag, where binding port 0 is not possible.
package testnet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the bottom of the range FreePort draws from.
const lowest = 10000

var (
	mu     sync.Mutex
	handed = map[uint16]bool{}
)

// FreePort returns a port on 127.0.0.1 that is free for both TCP and UDP
// and that this process has not handed out before.
//
// Ports come from below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), so no outgoing connection, in this
// process or another, can take the port between the check and the
// caller's bind. A port the kernel hands to bind(":0") is from that range,
// and a test that closed it and passed the number on lost it now and
// then to a connect elsewhere on the machine ("address already in use").
//
// On a machine whose ephemeral range leaves fewer than 1000 ports below
// it, FreePort falls back to a port the kernel picks, as before.
func FreePort() (uint16, error) {
	lo, hi := lowest, ephemeralLow()
	mu.Lock()
	defer mu.Unlock()
	for range 200 {
		var p uint16
		if hi-lo >= 1000 {
			p = uint16(lo + rand.IntN(hi-lo))
		} else {
			var err error
			if p, err = kernelPort(); err != nil {
				return 0, err
			}
		}
		if handed[p] || !free(p) {
			continue
		}
		handed[p] = true
		return p, nil
	}
	return 0, errors.New("no free port on 127.0.0.1 in 200 tries")
}

// kernelPort returns a port the kernel picked for a TCP listener on
// 127.0.0.1, closed again.
func kernelPort() (uint16, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port), nil
}

// free reports whether 127.0.0.1:p can be bound for TCP and for UDP.
func free(p uint16) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(p)))
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		return false
	}
	defer ln.Close()
	pc, err := net.ListenPacket("udp4", addr)
	if err != nil {
		return false
	}
	_ = pc.Close()
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range, or
// Linux's default when it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				return n
			}
		}
	}
	return 32768
}
