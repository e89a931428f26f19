package supervise

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodecache/nodecache/internal/handover"
	"github.com/nodecache/nodecache/pkg/logkey"
)

// Config is the supervisor's. Its zero values are usable but for Args.
type Config struct {
	// Args are the serving process's arguments after argv[0]: "run" and
	// the flags the supervisor was given.
	Args []string
	// Exe is the binary to run; empty: this one (/proc/self/exe), or
	// ExeFD's.
	Exe string
	// ExeFD, when above 2, is a descriptor open on the binary to run (the
	// supervisor binary's, open on nodecache's: launch.go), which Run then
	// owns. Each serving process inherits it last and runs it from there
	// (Inherited.Binary): another descriptor of the supervisor's could
	// not be relied on, since the child's are moved into place before it
	// runs the binary.
	ExeFD int
	// Argv0 is the serving process's argv[0]; empty: this one's.
	Argv0 string
	// Log is the supervisor's logger; nil discards.
	Log *slog.Logger
	// OOMScoreAdj is added to the serving process's oom_score_adj (at
	// most 1000), so that the kernel picks it before the supervisor.
	OOMScoreAdj int
	// InProcess is why Run runs in a nodecache process and not as
	// BinaryName (Start's reason), passed on to each serving process
	// (Inherited.InProcess) for status and doctor.
	InProcess string
	// Stdout and Stderr are the serving process's; nil: the supervisor's.
	Stdout, Stderr io.Writer
}

// ExitError is the end of a serving process the supervisor does not
// restart, for the supervisor's own exit status.
type ExitError struct {
	Code  int    // exit status, 128+signal for a signal
	Cause string // "exit status 1", "signal: killed"
}

func (e *ExitError) Error() string { return "serving process ended: " + e.Cause }

// ExitCode is the status the supervisor exits with.
func (e *ExitError) ExitCode() int { return e.Code }

// supervisor holds what outlives one serving process.
type supervisor struct {
	cfg Config
	log *slog.Logger

	mu         sync.Mutex // guards following
	listeners  held       // the last serving message's: UDP, then TCP
	udp, tcp   int
	backend    string   // the last serving message's iptables flavour
	journal    *os.File // the cache journal's newest file; nil before one
	served     bool     // a serving process said it serves
	handedOver bool     // a successor took the sockets: restart nothing

	bin      *os.File  // the binary the serving processes run, from Config.ExeFD; nil: Config.Exe
	code     codePages // the binary's mappings, dropped after each start and every second; nil: not looked for yet
	deaths   []Death   // within CrashWindow, oldest first
	restarts int
}

// Run starts the serving process and restarts it on the kept sockets, with
// the cache journal, each time it dies after it served; it forwards
// SIGTERM, SIGINT and SIGHUP to it and returns when it ends for any other
// reason: nil for exit status 0, an *ExitError otherwise.
func Run(cfg Config) error {
	if cfg.Exe == "" && cfg.ExeFD <= 2 {
		cfg.Exe = "/proc/self/exe"
	}
	if cfg.Argv0 == "" {
		cfg.Argv0 = os.Args[0]
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &supervisor{cfg: cfg, log: cfg.Log}
	if cfg.Exe == "" {
		unix.CloseOnExec(cfg.ExeFD)
		s.bin = os.NewFile(uintptr(cfg.ExeFD), "nodecache-binary")
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	defer s.drop()
	return s.loop(sigs)
}

func (s *supervisor) loop(sigs <-chan os.Signal) error {
	for {
		in := Inherited{Restarts: s.restarts, Deaths: s.deaths}
		_, in.CrashLoop = backoff(s.deaths)
		p, err := s.start(in)
		if err != nil {
			return err
		}
		debug.FreeOSMemory() // what starting it took goes back: the supervisor stays small
		if s.code == nil {
			if s.code, err = findCodePages(); err == nil {
				err = s.code.drop()
			}
			if err != nil {
				s.log.Warn("keeping the binary's pages mapped", logkey.Err, err)
				s.code = codePages{} // not looked for again
			}
		} else {
			_ = s.code.drop()
		}
		stopping := p.wait(sigs, s.code)
		code, cause := status(p.state)
		s.mu.Lock()
		served, handed := s.served, s.handedOver
		s.mu.Unlock()
		if stopping || code == 0 || !served || handed {
			if code == 0 {
				return nil
			}
			return &ExitError{Code: code, Cause: cause}
		}
		now := time.Now()
		s.deaths = append(recent(s.deaths, now), Death{At: now, Cause: cause, Lived: now.Sub(p.started)})
		delay, loop := backoff(s.deaths)
		s.log.Error("serving process died; starting another on the kept sockets", "cause", cause, "pid", p.pid,
			"restarts", s.restarts+1, "deaths_in_window", len(s.deaths), "delay", delay, "crash_loop", loop)
		if !s.sleep(delay, sigs) {
			return s.stop(sigs)
		}
		s.restarts++
	}
}

// sleep waits d; false when SIGTERM or SIGINT came first.
func (s *supervisor) sleep(d time.Duration, sigs <-chan os.Signal) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case sig := <-sigs:
			if sig != syscall.SIGHUP {
				return false
			}
		}
	}
}

// stop runs one more process, only to stop as an agent stops: SIGTERM
// came while none ran, and the link and rules go with the agent.
func (s *supervisor) stop(sigs <-chan os.Signal) error {
	s.log.Info("stopping while no serving process runs: one more runs the stop")
	p, err := s.start(Inherited{Restarts: s.restarts, Deaths: s.deaths, Stop: true})
	if err != nil {
		return err
	}
	p.wait(sigs, s.code)
	if code, cause := status(p.state); code != 0 {
		return &ExitError{Code: code, Cause: cause}
	}
	return nil
}

// proc is one serving process.
type proc struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time
	state   *os.ProcessState
	control chan struct{} // closed when its control socket has been read to the end
}

// start starts a serving process with in and what s keeps.
func (s *supervisor) start(in Inherited) (*proc, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("supervisor: control socket: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "control"), os.NewFile(uintptr(fds[1]), "control-child")
	defer theirs.Close()
	c, err := net.FileConn(mine)
	_ = mine.Close()
	if err != nil {
		return nil, fmt.Errorf("supervisor: control socket: %w", err)
	}
	files := []*os.File{theirs}
	s.mu.Lock()
	if !in.Stop {
		in.UDP, in.TCP, in.IPTablesBackend = s.udp, s.tcp, s.backend
		lf, err := s.listeners.files()
		if err != nil {
			s.mu.Unlock()
			_ = c.Close()
			return nil, fmt.Errorf("supervisor: %w", err)
		}
		defer handover.CloseFiles(lf)
		files = append(files, lf...)
		if s.journal != nil {
			in.Journal = true
			files = append(files, s.journal)
		}
	}
	s.mu.Unlock()
	exe := s.cfg.Exe
	if s.bin != nil { // the last descriptor it inherits: run from there
		files = append(files, s.bin)
		in.Binary = true
		exe = "/proc/self/fd/" + strconv.Itoa(firstFD+len(files)-1)
	}
	in.InProcess = s.cfg.InProcess
	in.Started = time.Now()
	env, err := json.Marshal(in)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	cmd := exec.Command(exe, s.cfg.Args...)
	cmd.Args[0] = s.cfg.Argv0
	cmd.Env = append(os.Environ(), Env+"="+string(env))
	cmd.ExtraFiles = files
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, s.cfg.Stdout, s.cfg.Stderr
	if cmd.Stdout == nil {
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	}
	// It dies with the supervisor: nothing would restart it, or hold its
	// sockets, and `cleanup` finds one process to deal with.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("supervisor: starting the serving process: %w", err)
	}
	p := &proc{cmd: cmd, pid: cmd.Process.Pid, started: time.Now(), control: make(chan struct{})}
	go s.readControl(c.(*net.UnixConn), p.control)
	if err := RaiseOOMScore(p.pid, s.cfg.OOMScoreAdj); err != nil {
		s.log.Warn("the serving process keeps the supervisor's oom_score_adj", logkey.Err, err)
	}
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	s.log.Info("serving process started", "pid", p.pid, "restarts", in.Restarts, "listeners", in.UDP+in.TCP,
		"journal", in.Journal, "stop_only", in.Stop, "took", time.Since(in.Started).Round(100*time.Microsecond),
		"supervisor_major_faults", ru.Majflt)
	return p, nil
}

// wait forwards signals to p until it exits, and reports whether one of
// them was SIGTERM or SIGINT.
func (p *proc) wait(sigs <-chan os.Signal, code codePages) bool {
	exited := make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		close(exited)
	}()
	// The binary's pages the supervisor touches again (the runtime, the
	// control socket's messages) are dropped every second, so that its RSS
	// stays below that of a process starting in the container (runc's init
	// for an exec probe, about 10 MiB): in an OOM kill's aftermath the
	// kernel picks the largest of those, and it must not be the supervisor.
	drop := time.NewTicker(time.Second)
	defer drop.Stop()
	stopping := false
	for {
		select {
		case <-drop.C:
			_ = code.drop()
			reapOrphans(p.pid) // as pid 1, the orphans of a killed serving process
		case sig := <-sigs:
			stopping = stopping || sig != syscall.SIGHUP
			_ = p.cmd.Process.Signal(sig)
		case <-exited:
			p.state = p.cmd.ProcessState
			// Its last messages are read before deciding; a process it
			// started could hold the socket open: not for long.
			select {
			case <-p.control:
			case <-time.After(time.Second):
			}
			return stopping
		}
	}
}

// status is a process end as an exit code and a cause.
func status(st *os.ProcessState) (int, string) {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), st.String()
	}
	return st.ExitCode(), st.String()
}

// readControl keeps what the serving process sends until its socket ends.
func (s *supervisor) readControl(c *net.UnixConn, done chan<- struct{}) {
	defer close(done)
	defer c.Close()
	for {
		var m handover.Msg
		files, err := handover.ReadFrame(c, &m)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.log.Warn("reading the serving process's control socket", logkey.Err, err)
			}
			return
		}
		s.keep(m, files)
	}
}

func (s *supervisor) keep(m handover.Msg, files []*os.File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var old []*os.File
	switch {
	case m.Op == handover.OpServing && len(files) == m.UDP+m.TCP && len(files) > 0:
		h, err := hold(files)
		if err != nil {
			s.log.Error("the supervisor could not keep the listeners: a crash would lose queries", logkey.Err, err)
			return
		}
		s.listeners.close()
		s.listeners, s.udp, s.tcp, s.served, s.backend = h, m.UDP, m.TCP, true, m.Backend
	case m.Op == handover.OpJournal && len(files) == 1:
		if s.journal != nil {
			old = []*os.File{s.journal}
		}
		s.journal = files[0]
	case m.Op == handover.OpHandedOver:
		s.handedOver = true
		s.listeners.close()
		old = files
		if s.journal != nil {
			old = append(old, s.journal)
		}
		s.listeners, s.journal, s.udp, s.tcp = nil, nil, 0, 0
	default:
		s.log.Warn("ignoring a control message from the serving process", "op", m.Op, "descriptors", len(files))
		old = files
	}
	handover.CloseFiles(old)
}

// drop closes what s keeps.
func (s *supervisor) drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listeners.close()
	if s.journal != nil {
		_ = s.journal.Close()
	}
	s.listeners, s.journal = nil, nil
	if s.bin != nil {
		_ = s.bin.Close()
	}
}
