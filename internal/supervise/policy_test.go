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
			d[i] = Death{At: t0.Add(time.Duration(i) * time.Second)}
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
