package agent

import (
	"fmt"
	"log/slog"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nodecache/nodecache/pkg/iface"
	"github.com/nodecache/nodecache/pkg/logkey"
)

// Only iptables-legacy needs CAP_NET_RAW (it talks to the kernel over a raw
// socket); the nft backend writes through netlink under CAP_NET_ADMIN. The
// DaemonSet grants NET_RAW because --iptables-mode=auto may pick legacy, so
// once the backend is known the agent gives it up: a compromised agent then
// cannot open packet sockets to read or forge the node's traffic. It drops
// the capability from every thread's effective, permitted and inheritable
// sets (capabilities are per thread); under no_new_privs
// (allowPrivilegeEscalation: false) no program it runs gets it back.

// dropNetRaw gives up CAP_NET_RAW unless backend is iptables-legacy, and
// logs what it did in one line.
func dropNetRaw(backend string, log *slog.Logger) {
	if backend == string(iface.ModeLegacy) {
		return
	}
	dropped, err := dropCapability(unix.CAP_NET_RAW)
	switch {
	case err != nil:
		log.Info("keeping CAP_NET_RAW", "backend", backend, logkey.Err, err)
	case dropped:
		log.Info("dropped CAP_NET_RAW: the rules backend does not need it", "backend", backend)
	}
}

// dropCapability clears c from the effective, permitted and inheritable
// sets of every thread of the process. It reports false when the process
// did not hold c.
func dropCapability(c int) (bool, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false, fmt.Errorf("reading capabilities: %w", err)
	}
	word, bit := c/32, uint32(1)<<(c%32)
	d := &data[word]
	if (d.Effective|d.Permitted|d.Inheritable)&bit == 0 {
		return false, nil
	}
	d.Effective &^= bit
	d.Permitted &^= bit
	d.Inheritable &^= bit
	// On every thread: a thread left with it could exec a program that has it.
	if _, _, errno := syscall.AllThreadsSyscall(unix.SYS_CAPSET,
		uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return false, fmt.Errorf("dropping capability %d on every thread: %w", c, errno)
	}
	return true, nil
}
