package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/PID/stat
// (100 on every Linux this runs on).
const clockTick = 10 * time.Millisecond

// proc is a child process whose output goes to <dir>/<name>.log.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited
}

func startProc(name, dir, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", logPath, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close() // nothing was written
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status shows in the log tail when it matters
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

// pid is the process's id; a proc without a command is this process.
func (p *proc) pid() int {
	if p.cmd == nil {
		return os.Getpid()
	}
	return p.cmd.Process.Pid
}

// exited reports whether the process is gone, with the tail of its log.
func (p *proc) exited() (bool, string) {
	select {
	case <-p.done:
		b, _ := os.ReadFile(p.log)
		if len(b) > 2000 {
			b = b[len(b)-2000:]
		}
		return true, string(b)
	default:
		return false, ""
	}
}

// stop sends SIGTERM, then SIGKILL after 10 s, and waits.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// cpu is the user plus system CPU time of the process so far.
func (p *proc) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid()))
	if err != nil {
		return 0, fmt.Errorf("reading stat of %s: %w", p.name, err)
	}
	// Fields after the ")" that closes the command name: state is the
	// first, utime the 12th, stime the 13th.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("stat of %s: %d fields", p.name, len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("stat of %s: bad utime/stime %q %q", p.name, f[11], f[12])
	}
	return time.Duration(u+s) * clockTick, nil
}

// memory returns VmRSS and VmHWM (peak RSS) in bytes.
func (p *proc) memory() (rss, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		return 0, 0, fmt.Errorf("reading status of %s: %w", p.name, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("status of %s: %s: %w", p.name, line, err)
		}
		if k == "VmRSS" {
			rss = n << 10
		} else {
			peak = n << 10
		}
	}
	return rss, peak, nil
}

// cpuOf sums the CPU time of ps.
func cpuOf(ps []*proc) (time.Duration, error) {
	var sum time.Duration
	for _, p := range ps {
		c, err := p.cpu()
		if err != nil {
			return 0, err
		}
		sum += c
	}
	return sum, nil
}
