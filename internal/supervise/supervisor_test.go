package supervise

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The serving processes of these tests are this test binary again: with
// Env set, TestMain runs the role $SUPERVISE_TEST_ROLE names instead of
// the tests, in the directory $SUPERVISE_TEST_DIR.
func TestMain(m *testing.M) {
	if _, ok := os.LookupEnv(Env); ok {
		os.Exit(serve(os.Getenv("SUPERVISE_TEST_ROLE"), os.Getenv("SUPERVISE_TEST_DIR")))
	}
	if _, ok := os.LookupEnv("SUPERVISE_TEST_LAUNCH"); ok {
		os.Exit(launch())
	}
	os.Exit(m.Run())
}

// serve is one serving process of a test; its exit status is the test's
// verdict on what it inherited (0 when all is well).
func serve(role, dir string) int {
	c, err := Child()
	if err != nil || c == nil {
		fmt.Fprintln(os.Stderr, "Child:", err)
		return 10
	}
	in := c.Info()
	b, _ := json.Marshal(in)
	_ = os.WriteFile(filepath.Join(dir, "inherited-"+strconv.Itoa(in.Restarts)), b, 0o600)
	comm, _ := os.ReadFile("/proc/self/comm")
	_ = os.WriteFile(filepath.Join(dir, "comm-"+strconv.Itoa(in.Restarts)), comm, 0o600)
	var fds []string // what this process holds once Child has run
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		fds = append(fds, target)
	}
	_ = os.WriteFile(filepath.Join(dir, "fds-"+strconv.Itoa(in.Restarts)), []byte(strings.Join(fds, "\n")), 0o600)
	switch {
	case role == "never-serves":
		return 3
	case role == "crash-loop" && in.Restarts < 3:
		if err := c.Serving(1, 0, "", []*os.File{udpFile()}); err != nil {
			return 11
		}
		return 2
	case role == "crash-loop":
		return 0
	case in.Restarts == 0: // role "kill": serve, then die by SIGKILL with a datagram queued
		if c.Serving(1, 0, "nft", []*os.File{udpFile()}) != nil || c.PublishJournal(journalFile("warm")) != nil {
			return 11
		}
		for !exists(filepath.Join(dir, "sent")) {
			time.Sleep(10 * time.Millisecond)
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	default: // the restarted process: the datagram and the journal must be there
		return readInherited(c)
	}
}

func udpFile() *os.File {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		panic(err)
	}
	f, err := conn.File()
	if err != nil {
		panic(err)
	}
	_ = os.WriteFile(filepath.Join(os.Getenv("SUPERVISE_TEST_DIR"), "port"),
		[]byte(strconv.Itoa(conn.LocalAddr().(*net.UDPAddr).Port)), 0o600)
	return f
}

func journalFile(content string) *os.File {
	fd, err := unix.MemfdCreate("test-journal", unix.MFD_CLOEXEC)
	if err != nil {
		panic(err)
	}
	f := os.NewFile(uintptr(fd), "journal")
	_, _ = f.WriteString(content)
	return f
}

func readInherited(c *Conn) int {
	ls := c.Listeners()
	if len(ls) != 1 {
		return 12
	}
	if c.Info().IPTablesBackend != "nft" {
		return 17 // the first process's iptables flavour
	}
	pc, err := net.FilePacketConn(ls[0])
	if err != nil {
		return 13
	}
	_ = pc.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 16)
	if n, _, err := pc.ReadFrom(buf); err != nil || string(buf[:n]) != "ping" {
		return 14
	}
	j := c.Journal()
	if j == nil {
		return 15
	}
	b, err := io.ReadAll(io.NewSectionReader(j, 0, 4))
	if err != nil || string(b) != "warm" {
		return 16
	}
	return 0
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// run runs a supervisor of this test binary in role until it returns.
func run(t *testing.T, role string) (string, error) {
	t.Helper()
	return runConfig(t, role, Config{Exe: os.Args[0], Args: []string{"-test.run=^$"}})
}

// runConfig is run with the supervisor's config cfg.
func runConfig(t *testing.T, role string, cfg Config) (string, error) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("SUPERVISE_TEST_ROLE", role)
	t.Setenv("SUPERVISE_TEST_DIR", dir)
	done := make(chan error, 1)
	go func() { done <- Run(cfg) }()
	if role == "kill" {
		port := waitFile(t, filepath.Join(dir, "port"), done)
		conn, err := net.Dial("udp", "127.0.0.1:"+port)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		_ = conn.Close()
		if err := os.WriteFile(filepath.Join(dir, "sent"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		return dir, err
	case <-time.After(60 * time.Second):
		t.Fatal("the supervisor did not return within 60s")
	}
	return dir, nil
}

func waitFile(t *testing.T, path string, done <-chan error) string {
	t.Helper()
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		select {
		case err := <-done:
			t.Fatalf("the supervisor returned before %s was written: %v", path, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// A serving process killed with a query queued in its socket: the next one
// gets the socket with the query still in it, and the journal.
func TestRestartKeepsSocketAndJournal(t *testing.T) {
	dir, err := run(t, "kill")
	if err != nil {
		t.Fatalf("Run: got %v, want nil (the restarted process found the datagram and the journal)", err)
	}
	var in Inherited
	b, _ := os.ReadFile(filepath.Join(dir, "inherited-1"))
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	if in.UDP != 1 || !in.Journal || len(in.Deaths) != 1 || in.Deaths[0].Cause != "signal: killed" || in.CrashLoop {
		t.Errorf("restarted process inherited %+v, want 1 UDP listener, the journal, one death by SIGKILL, no crash loop", in)
	}
}

// The supervisor binary runs the serving processes from a descriptor open
// on nodecache (Config.ExeFD): each inherits it after the listeners and
// the journal, and the restarted one is the same binary even when the file
// is gone meanwhile (here, a copy of this test binary).
func TestRestartFromExeFD(t *testing.T) {
	copyPath := filepath.Join(t.TempDir(), "nodecache")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyPath, b, 0o700); err != nil { //nolint:gosec // an executable the test runs
		t.Fatal(err)
	}
	fd, err := unix.Open(copyPath, unix.O_PATH, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(copyPath); err != nil {
		t.Fatal(err)
	}
	dir, err := runConfig(t, "kill", Config{ExeFD: fd, Args: []string{"-test.run=^$"}, Argv0: "/opt/x/nodecache"})
	if err != nil {
		t.Fatalf("Run: got %v, want nil (the restarted process found the datagram and the journal)", err)
	}
	var in Inherited
	b, _ = os.ReadFile(filepath.Join(dir, "inherited-1"))
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	if !in.Binary || in.UDP != 1 || !in.Journal {
		t.Errorf("restarted process inherited %+v, want the binary after 1 UDP listener and the journal", in)
	}
	for i := range 2 { // named as argv[0] says (not "5", the descriptor's number), the binary's descriptor closed
		n := strconv.Itoa(i)
		if comm, _ := os.ReadFile(filepath.Join(dir, "comm-"+n)); string(comm) != "nodecache\n" {
			t.Errorf("serving process %d is named %q, want nodecache (from its argv[0])", i, comm)
		}
		fds, _ := os.ReadFile(filepath.Join(dir, "fds-"+n))
		if strings.Contains(string(fds), copyPath) {
			t.Errorf("serving process %d holds the binary's descriptor after Child: %q", i, fds)
		}
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
		t.Errorf("descriptor %d is still open after Run; want it closed", fd)
	}
}

// Three deaths within CrashWindow are a crash loop, which the next serving
// process is told of.
func TestCrashLoopReported(t *testing.T) {
	dir, err := run(t, "crash-loop")
	if err != nil {
		t.Fatalf("Run: got %v, want nil", err)
	}
	var in Inherited
	b, _ := os.ReadFile(filepath.Join(dir, "inherited-3"))
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatal(err)
	}
	if !in.CrashLoop || len(in.Deaths) != 3 || in.Deaths[2].Cause != "exit status 2" || in.UDP != 1 {
		t.Errorf("fourth process inherited %+v, want a crash loop of 3 deaths (exit status 2) and the listener", in)
	}
}

// A process that dies before it ever served is not restarted: the
// supervisor exits with its status (bad flags fail at start).
func TestNoRestartBeforeServing(t *testing.T) {
	dir, err := run(t, "never-serves")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 {
		t.Fatalf("Run: got %v, want an ExitError with status 3", err)
	}
	if exists(filepath.Join(dir, "inherited-1")) {
		t.Error("a second serving process started; want none")
	}
}

// The supervisor closes what it no longer needs across restarts: the files
// made for each serving process once it started, and the listeners of the
// last serving message when a new one comes. Three processes serve and die
// (crash-loop); the supervisor's descriptors after Run are those before
// it. The garbage collector is off meanwhile: a leaked *os.File would
// otherwise be closed by its finalizer, whenever a collection came.
func TestNoDescriptorLeakAcrossRestarts(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// A first run, so that what the first use of the netpoller, os/exec
	// and signals opens for good is open before counting.
	if _, err := run(t, "never-serves"); err == nil {
		t.Fatal("never-serves: want an error")
	}
	before := openFDs(t)
	if _, err := run(t, "crash-loop"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	after := openFDs(t)
	var leaked []string
	for fd, target := range after {
		if before[fd] != target {
			leaked = append(leaked, fmt.Sprintf("%s -> %s", fd, target))
		}
	}
	if len(leaked) > 0 || len(after) != len(before) {
		t.Errorf("descriptors: %d before Run, %d after; new ones: %v", len(before), len(after), leaked)
	}
}

// openFDs maps this process's open descriptors to what they refer to.
func openFDs(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			m[e.Name()] = l
		}
	}
	return m
}
