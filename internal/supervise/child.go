package supervise

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodecache/nodecache/internal/handover"
)

// Env is the environment variable that makes `nodecache run` the serving
// process rather than its supervisor; its value is Inherited as JSON.
const Env = "NODECACHE_SUPERVISED"

// The first descriptor a serving process inherits: the control socket.
// The listeners and the journal follow it, in Inherited's order.
const firstFD = 3

// Inherited is what a supervisor passes the serving process it starts.
type Inherited struct {
	// UDP and TCP are how many listener descriptors follow the control
	// socket, UDP first; zero for the first serving process.
	UDP int `json:"udp,omitempty"`
	TCP int `json:"tcp,omitempty"`
	// Journal says whether the cache journal's descriptor follows them.
	Journal bool `json:"journal,omitempty"`
	// Restarts counts the serving processes started after one died.
	Restarts int `json:"restarts,omitempty"`
	// Deaths are the deaths within CrashWindow, oldest first.
	Deaths []Death `json:"deaths,omitempty"`
	// CrashLoop is set when Deaths holds CrashLoopDeaths or more: the
	// serving process reports it until CrashWindow after the last one.
	CrashLoop bool `json:"crash_loop,omitempty"`
	// IPTablesBackend is the iptables flavour the previous serving process
	// wrote its rules with; empty when there was none.
	IPTablesBackend string `json:"iptables_backend,omitempty"`
	// Started is when the supervisor started this process, just before
	// its exec: the restarted process logs how long it took to read the
	// kept sockets from there.
	Started time.Time `json:"started,omitzero"`
	// Binary says that the binary this process runs follows them, a
	// descriptor it closes (Config.ExeFD).
	Binary bool `json:"binary,omitempty"`
	// InProcess is why the supervisor runs in a nodecache process rather
	// than as BinaryName (Config.InProcess); empty when it does not.
	InProcess string `json:"in_process,omitempty"`
	// Stop asks for no serving at all: the supervisor got SIGTERM while
	// no serving process ran, and this one only stops as an agent stops
	// (removing the link and rules unless they must stay).
	Stop bool `json:"stop,omitempty"`
}

// Death is one serving process's end.
type Death struct {
	At    time.Time     `json:"at"`
	Cause string        `json:"cause"` // "signal: killed", "exit status 2", ...
	Lived time.Duration `json:"lived"` // from its start to its death
}

// CrashLoopUntil is when a crash loop stops being reported: CrashWindow
// after the last death; zero when there is none.
func (in *Inherited) CrashLoopUntil() time.Time {
	if !in.CrashLoop || len(in.Deaths) == 0 {
		return time.Time{}
	}
	return in.Deaths[len(in.Deaths)-1].At.Add(CrashWindow)
}

// Conn is the serving process's side of the control socket.
type Conn struct {
	in        Inherited
	listeners []*os.File // UDP, then TCP; handed to the caller once
	journal   *os.File   // nil without one; handed to the caller once

	mu sync.Mutex // guards c's writes
	c  *net.UnixConn
}

// Child returns the control connection when this process was started by a
// supervisor (Env is set), and nil, nil when it was not.
func Child() (*Conn, error) {
	v, ok := os.LookupEnv(Env)
	if !ok {
		return nil, nil
	}
	_ = os.Unsetenv(Env) // not for the processes this one starts
	// The kernel names a process after the path it was run from: "exe"
	// (/proc/self/exe) or the descriptor's number (/proc/self/fd/N), which
	// ps, top, pgrep and the OOM killer's log line would show; the name
	// its argv[0] gives instead, as a nodecache started by hand has.
	_ = os.WriteFile("/proc/self/comm", []byte(filepath.Base(os.Args[0])), 0)
	var in Inherited
	if err := json.Unmarshal([]byte(v), &in); err != nil {
		return nil, fmt.Errorf("reading $%s from the supervisor: %w", Env, err)
	}
	// Not for the processes this one runs (iptables, ...): a descriptor
	// they held would keep the control socket open after this one died.
	n := 1 + in.UDP + in.TCP
	if in.Journal {
		n++
	}
	for fd := firstFD; fd < firstFD+n; fd++ {
		unix.CloseOnExec(fd)
	}
	if in.Binary { // what the supervisor ran this process from: not needed here
		_ = unix.Close(firstFD + n)
	}
	ctl := os.NewFile(firstFD, "supervisor-control")
	nc, err := net.FileConn(ctl)
	_ = ctl.Close()
	if err != nil {
		return nil, fmt.Errorf("opening the supervisor's control socket: %w", err)
	}
	c := &Conn{in: in, c: nc.(*net.UnixConn)}
	fd := firstFD + 1
	for i := range in.UDP + in.TCP {
		c.listeners = append(c.listeners, os.NewFile(uintptr(fd), fmt.Sprintf("inherited-listener-%d", i)))
		fd++
	}
	if in.Journal {
		c.journal = os.NewFile(uintptr(fd), "cache-journal")
	}
	return c, nil
}

// Info is what the supervisor said about this process.
func (c *Conn) Info() Inherited { return c.in }

// Listeners returns the inherited listeners (UDP first, then TCP), nil for
// the first serving process. The caller owns them; a second call returns
// nil.
func (c *Conn) Listeners() []*os.File {
	l := c.listeners
	c.listeners = nil
	return l
}

// Journal returns the inherited cache journal, nil when there is none.
// The caller owns it; a second call returns nil.
func (c *Conn) Journal() *os.File {
	j := c.journal
	c.journal = nil
	return j
}

// Serving gives the supervisor the listeners this process serves on,
// UDP first, and the iptables flavour of its rules (backend, empty for
// none): it keeps them for the next serving process. The caller keeps its
// files.
func (c *Conn) Serving(udp, tcp int, backend string, files []*os.File) error {
	if udp+tcp != len(files) {
		return fmt.Errorf("serving: %d udp and %d tcp listeners, %d files", udp, tcp, len(files))
	}
	return c.send(handover.Msg{Op: handover.OpServing, UDP: udp, TCP: tcp, Backend: backend}, files)
}

// PublishJournal gives the supervisor the cache journal's current file.
func (c *Conn) PublishJournal(f *os.File) error {
	return c.send(handover.Msg{Op: handover.OpJournal}, []*os.File{f})
}

// HandedOver tells the supervisor a successor took the sockets: it drops
// its copies and restarts nothing after this process ends.
func (c *Conn) HandedOver() error { return c.send(handover.Msg{Op: handover.OpHandedOver}, nil) }

func (c *Conn) send(m handover.Msg, files []*os.File) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := handover.WriteFrame(c.c, m, files); err != nil {
		return fmt.Errorf("telling the supervisor %s: %w", m.Op, err)
	}
	return nil
}

// Close closes the control socket and any descriptor not taken.
func (c *Conn) Close() error {
	handover.CloseFiles(c.Listeners())
	if j := c.Journal(); j != nil {
		_ = j.Close()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.c.Close())
}
