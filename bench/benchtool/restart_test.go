package main

import (
	"os"
	"os/exec"
	"testing"
)

func TestOnlyChild(t *testing.T) {
	if _, err := onlyChild(os.Getpid()); err == nil {
		t.Fatal("onlyChild of the test with no child: got no error, want one")
	}
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	got, err := onlyChild(os.Getpid())
	if err != nil || got != cmd.Process.Pid {
		t.Errorf("onlyChild: got %d, %v; want %d", got, err, cmd.Process.Pid)
	}
}

func TestProcessCPU(t *testing.T) {
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 50_000_000 {
		x += i
	}
	after, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after <= before || x == 0 {
		t.Errorf("processCPU: %v before a loop, %v after; want more after", before, after)
	}
	if _, err := processCPU(0x7fffffff); err == nil {
		t.Error("processCPU of no process: got no error, want one")
	}
}
