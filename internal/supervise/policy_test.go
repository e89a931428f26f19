package supervise

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	deaths := func(n int) []Death {
		d := make([]Death, n)
		for i := range d {
			d[i] = Death{At: t0.Add(time.Duration(i) * time.Second), Lived: time.Second}
		}
		return d
	}
	for _, tc := range []struct {
		n     int
		delay time.Duration
		loop  bool
	}{
		{1, 0, false},
		{2, 250 * time.Millisecond, false},
		{3, 500 * time.Millisecond, true},
		{4, time.Second, true},
		{10, 30 * time.Second, true},
		{40, 30 * time.Second, true},
	} {
		d, loop := backoff(deaths(tc.n))
		if d != tc.delay || loop != tc.loop {
			t.Errorf("%d deaths: got %v, crash loop %v; want %v, %v", tc.n, d, loop, tc.delay, tc.loop)
		}
	}
}

// TestBackoffServedProcess: a process that served QuickDeath or longer is
// restarted at once, whatever died before it, and ends the quick streak;
// the crash loop still counts every death in the window.
func TestBackoffServedProcess(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	quick, served := time.Second, QuickDeath
	for _, tc := range []struct {
		lived []time.Duration
		delay time.Duration
		loop  bool
	}{
		{[]time.Duration{served, served}, 0, false},       // kill -9, then an OOM kill 30 s later
		{[]time.Duration{quick, served}, 0, false},        // a bad start, then one that served
		{[]time.Duration{quick, served, served}, 0, true}, // three deaths: reported, not delayed
		{[]time.Duration{served, quick, quick}, 250 * time.Millisecond, true},
		{[]time.Duration{quick, quick, served, quick}, 0, true}, // the streak restarts after a served one
	} {
		d := make([]Death, len(tc.lived))
		for i, l := range tc.lived {
			d[i] = Death{At: t0.Add(time.Duration(i) * time.Second), Lived: l}
		}
		if got, loop := backoff(d); got != tc.delay || loop != tc.loop {
			t.Errorf("lived %v: got %v, crash loop %v; want %v, %v", tc.lived, got, loop, tc.delay, tc.loop)
		}
	}
}

func TestRecentForgetsOldDeaths(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	d := []Death{{At: t0}, {At: t0.Add(30 * time.Second)}, {At: t0.Add(59 * time.Second)}}
	if got := recent(d, t0.Add(60*time.Second)); len(got) != 2 || !got[0].At.Equal(d[1].At) {
		t.Errorf("recent at 60s: got %v, want the last two", got)
	}
	if got := recent(d, t0.Add(2*time.Minute)); len(got) != 0 {
		t.Errorf("recent at 2m: got %v, want none", got)
	}
	in := Inherited{Deaths: d, CrashLoop: true}
	if got, want := in.CrashLoopUntil(), t0.Add(59*time.Second+CrashWindow); !got.Equal(want) {
		t.Errorf("CrashLoopUntil: got %v, want %v", got, want)
	}
}
