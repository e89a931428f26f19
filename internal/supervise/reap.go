package supervise

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// reapOrphans collects the children of the supervisor that have exited,
// other than keep (the serving process, whose exit its exec.Cmd waits
// for), and returns how many. A process whose parent dies is handed to
// the container's pid 1, which `nodecache run` is in a pod: an iptables
// command the killed serving process had started, say. Unless pid 1 waits
// for it, it stays a zombie, holding a pid, for the container's life. It
// looks before it reaps (WNOWAIT), so that keep's exit status is left for
// its Wait; as keep is then reaped at once, any zombie it hid is collected
// at the next call.
func reapOrphans(keep int) int {
	n := 0
	for {
		var info unix.Siginfo
		if err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); err != nil {
			return n // ECHILD: no children
		}
		pid := siginfoPid(&info)
		if pid <= 0 || pid == keep { // none has exited; or keep, for its Wait
			return n
		}
		var ws unix.WaitStatus
		if got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err != nil || got != pid {
			return n
		}
		n++
	}
}

// siginfoPid is si_pid of a SIGCHLD siginfo: the first field of the union
// that follows si_signo, si_errno and si_code, which is aligned for a
// pointer (offset 16 on 64-bit platforms, 12 on 32-bit ones).
func siginfoPid(info *unix.Siginfo) int {
	const ptr = unsafe.Sizeof(uintptr(0))
	const off = (3*4 + ptr - 1) &^ (ptr - 1)
	return int(*(*int32)(unsafe.Add(unsafe.Pointer(info), off)))
}
