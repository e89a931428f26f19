package supervise

// The supervisor's memory: the serving process is the one the kernel kills
// when the container is out of memory, and the supervisor keeps small.

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// RaiseOOMScore sets pid's oom_score_adj to this process's plus by, at
// most 1000. Raising is allowed without privileges; lowering is not.
func RaiseOOMScore(pid, by int) error {
	if by <= 0 {
		return nil
	}
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return fmt.Errorf("reading oom_score_adj: %w", err)
	}
	own, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("reading oom_score_adj: %w", err)
	}
	v := strconv.Itoa(min(own+by, 1000))
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid), []byte(v), 0); err != nil {
		return fmt.Errorf("raising the serving process's oom_score_adj to %s: %w", v, err)
	}
	return nil
}

// codePages are the mappings of files this process maps (the binary's)
// whose pages it can drop from its page tables: they stay in the page
// cache, and what the supervisor touches again faults back in. Its RSS is
// then mostly its own heap, so that when the container is at its memory
// limit and the serving process is already the OOM killer's victim, the
// kernel's next pick is a process that is starting (a probe) rather than
// the supervisor, whose mapped binary made it the largest. Executable
// mappings are never written; read-only ones too (the binary's read-only
// data) when the binary is static and not position-independent
// (pristineReadOnly), as `make build` and the image build it: else they
// may hold relocations (RELRO) that discarding would undo.
type codePages []struct{ start, end uintptr }

// findCodePages reads this process's mappings once: a static binary's do
// not change while it runs, and the supervisor drops them every second.
func findCodePages() (codePages, error) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	readOnly := pristineReadOnly(string(b))
	var c codePages
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || (f[1] != "r-xp" && (f[1] != "r--p" || !readOnly)) || !strings.HasPrefix(f[5], "/") {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		c = append(c, struct{ start, end uintptr }{uintptr(start), uintptr(end)})
	}
	return c, nil
}

// drop takes c's pages out of this process's page tables.
func (c codePages) drop() error {
	for _, m := range c {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED); errno != 0 {
			return fmt.Errorf("madvise %x-%x: %w", m.start, m.end, errno)
		}
	}
	return nil
}

// pristineReadOnly says whether the read-only file mappings in maps are
// the files' bytes as they are: no dynamic loader is mapped and this
// binary is ET_EXEC (not PIE), so nothing relocated them.
func pristineReadOnly(maps string) bool {
	if strings.Contains(maps, "/ld-") || strings.Contains(maps, ".so") {
		return false
	}
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return false
	}
	defer f.Close()
	var hdr [18]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return false
	}
	return string(hdr[:4]) == "\x7fELF" && hdr[5] == 1 && hdr[16] == 2 && hdr[17] == 0 // little-endian ET_EXEC
}
