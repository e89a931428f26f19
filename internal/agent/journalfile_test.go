package agent

import (
	"log/slog"
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
