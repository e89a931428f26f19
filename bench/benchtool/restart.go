package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// restartConfig is what `benchtool restart` measures: supervised agents
// (each a supervisor pid and the address it serves), whose serving
// processes it SIGKILLs in turn, Rounds times each.
type restartConfig struct {
	Supervisors []int
	Servers     []string
	Name        string        // asked after each kill; answered without an upstream
	Rounds      int           // kills of each agent
	Every       time.Duration // between kills of one agent: restarts back off under 10 s
	Timeout     time.Duration // no answer by then fails the round
	Interval    time.Duration // between probe queries
}

// restartSample is one kill: the first answer to a query sent after the
// killed process exited, from the kill, and the CPU time (all threads,
// from /proc's schedstat) the new serving process had used when it came.
type restartSample struct {
	Agent, Round int
	Pid          int
	Gap          time.Duration
	CPU          time.Duration
}

func (s restartSample) format() string {
	return fmt.Sprintf("agent=%d round=%d pid=%d first_answer_ms=%.1f cpu_ms=%.1f", s.Agent, s.Round, s.Pid,
		float64(s.Gap.Microseconds())/1000, float64(s.CPU.Microseconds())/1000)
}

func runRestartCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("restart", flag.ContinueOnError)
	var cfg restartConfig
	sups := fs.String("supervisors", "", "comma-separated supervisor pids")
	servers := fs.String("servers", "", "comma-separated host:port each supervisor's agent serves, in the same order")
	fs.StringVar(&cfg.Name, "name", "", "name asked (A) after each kill")
	fs.IntVar(&cfg.Rounds, "rounds", 10, "kills of each agent")
	fs.DurationVar(&cfg.Every, "every", 11*time.Second, "time between two kills of one agent (restarts back off under 10 s)")
	fs.DurationVar(&cfg.Timeout, "timeout", 5*time.Second, "a round without an answer by then fails")
	fs.DurationVar(&cfg.Interval, "interval", 250*time.Microsecond, "time between probe queries")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, s := range strings.Split(*sups, ",") {
		p, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("restart: -supervisors %q: %w", *sups, err)
		}
		cfg.Supervisors = append(cfg.Supervisors, p)
	}
	cfg.Servers = strings.Split(*servers, ",")
	if len(cfg.Servers) != len(cfg.Supervisors) || cfg.Name == "" || cfg.Rounds < 1 {
		return errors.New("restart: want as many -servers as -supervisors, a -name and -rounds of 1 or more")
	}
	return measureRestarts(ctx, cfg, func(s restartSample) error {
		_, err := fmt.Fprintln(out, s.format())
		return err
	})
}

// measureRestarts kills each agent's serving process in turn, alternating
// the order every round so that neither agent always goes first.
func measureRestarts(ctx context.Context, cfg restartConfig, emit func(restartSample) error) error {
	n := len(cfg.Supervisors)
	for round := range cfg.Rounds {
		start := time.Now()
		for k := range n {
			i := (k + round) % n
			s, err := killAndProbe(ctx, cfg, i)
			if err != nil {
				return fmt.Errorf("round %d, agent %d: %w", round, i, err)
			}
			s.Round = round
			if err := emit(s); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(start.Add(cfg.Every))):
		}
	}
	return nil
}

// killAndProbe SIGKILLs agent i's serving process, waits for its exit and
// asks cfg.Name every cfg.Interval until the first answer.
func killAndProbe(ctx context.Context, cfg restartConfig, i int) (restartSample, error) {
	sup := cfg.Supervisors[i]
	old, err := onlyChild(sup)
	if err != nil {
		return restartSample{}, err
	}
	pidfd, err := unix.PidfdOpen(old, 0)
	if err != nil {
		return restartSample{}, fmt.Errorf("pidfd of %d: %w", old, err)
	}
	defer unix.Close(pidfd)
	conn, err := net.Dial("udp", cfg.Servers[i])
	if err != nil {
		return restartSample{}, fmt.Errorf("dialing %s: %w", cfg.Servers[i], err)
	}
	defer conn.Close()
	var firstID atomic.Int32 // replies to IDs below it may come from the killed process
	firstID.Store(1 << 16)
	answered := make(chan time.Time, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			at := time.Now()
			if n >= 2 && int32(buf[0])<<8|int32(buf[1]) >= firstID.Load() {
				answered <- at
				return
			}
		}
	}()
	killAt := time.Now()
	if err := unix.Kill(old, unix.SIGKILL); err != nil {
		return restartSample{}, fmt.Errorf("killing %d: %w", old, err)
	}
	if _, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, int(cfg.Timeout.Milliseconds())); err != nil {
		return restartSample{}, fmt.Errorf("waiting for %d to exit: %w", old, err)
	}
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(cfg.Name), dns.TypeA)
	id := uint16(1)
	firstID.Store(int32(id))
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	deadline := time.After(cfg.Timeout)
	for {
		q.Id = id
		id = max(id+1, 1)
		wire, err := q.Pack()
		if err != nil {
			return restartSample{}, err
		}
		if _, err := conn.Write(wire); err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
			return restartSample{}, fmt.Errorf("sending: %w", err)
		}
		select {
		case at := <-answered:
			pid, err := onlyChild(sup)
			if err != nil {
				return restartSample{}, err
			}
			cpu, err := processCPU(pid)
			return restartSample{Agent: i, Pid: pid, Gap: at.Sub(killAt), CPU: cpu}, err
		case <-deadline:
			return restartSample{}, fmt.Errorf("no answer %v after killing %d", cfg.Timeout, old)
		case <-ctx.Done():
			return restartSample{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// onlyChild is the one child process of pid.
func onlyChild(pid int) (int, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil {
		return 0, err
	}
	var kids []string
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that ended
		}
		kids = append(kids, strings.Fields(string(b))...)
	}
	if len(kids) != 1 {
		return 0, fmt.Errorf("process %d has children %v, want one", pid, kids)
	}
	return strconv.Atoi(kids[0])
}

// processCPU is the time pid's threads have run, from their schedstat (in
// nanoseconds, where /proc's stat counts clock ticks).
func processCPU(pid int) (time.Duration, error) {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", s, err)
		}
		sum += time.Duration(ns)
	}
	if len(stats) == 0 {
		return 0, fmt.Errorf("process %d: no threads", pid)
	}
	return sum, nil
}
