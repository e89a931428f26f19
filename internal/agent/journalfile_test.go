package agent

import (
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
)

// TestJournalFileAllocatedAtStart: the ring's memory is allocated when the
// memfd is made, not as records fill it, and the file's size stays 0 (the
// journal's scan reads the written extent from it).
func TestJournalFileAllocatedAtStart(t *testing.T) {
	a := &Agent{log: slog.New(slog.DiscardHandler)}
	const size = 3 << 20
	f, err := a.newJournalFile(size)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 0 {
		t.Errorf("size %d, want 0", st.Size)
	}
	if got := st.Blocks * 512; got < size {
		t.Errorf("allocated %d bytes, want at least %d", got, size)
	}
}

// oneMoreP adds a P while the restore runs, then gives back the
// runtime's default, or the GOMAXPROCS environment variable's value.
func TestOneMoreP(t *testing.T) {
	t.Cleanup(func(p int) func() { return func() { runtime.GOMAXPROCS(p) } }(runtime.GOMAXPROCS(0)))
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	for _, env := range []string{"", strconv.Itoa(def + 2)} {
		t.Setenv("GOMAXPROCS", env)
		if env == "" {
			os.Unsetenv("GOMAXPROCS")
		}
		want := def
		if env != "" {
			want = def + 2
			runtime.GOMAXPROCS(want) // as the runtime read it at start
		}
		restore := oneMoreP()
		if got := runtime.GOMAXPROCS(0); got != want+1 {
			t.Errorf("GOMAXPROCS=%q during the restore: %d, want %d", env, got, want+1)
		}
		restore()
		if got := runtime.GOMAXPROCS(0); got != want {
			t.Errorf("GOMAXPROCS=%q after: %d, want %d", env, got, want)
		}
	}
}
