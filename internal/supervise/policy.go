package supervise

import "time"

// The restart policy: the first death in CrashWindow restarts at once;
// each further one waits twice as long as the one before, from
// BackoffStart up to BackoffMax. CrashLoopDeaths deaths in CrashWindow is a
// crash loop. A serving process that lives CrashWindow clears it all.
const (
	CrashWindow     = 60 * time.Second
	CrashLoopDeaths = 3
	BackoffStart    = 250 * time.Millisecond
	BackoffMax      = 30 * time.Second
)

// recent returns the deaths within CrashWindow of now, oldest first.
func recent(deaths []Death, now time.Time) []Death {
	i := 0
	for i < len(deaths) && now.Sub(deaths[i].At) >= CrashWindow {
		i++
	}
	return deaths[i:]
}

// backoff is how long to wait before the next serving process, given the
// deaths within CrashWindow (the last one just now), and whether that is a
// crash loop.
func backoff(deaths []Death) (time.Duration, bool) {
	n := len(deaths)
	if n <= 1 {
		return 0, false
	}
	d := BackoffStart
	for i := 2; i < n && d < BackoffMax; i++ {
		d *= 2
	}
	return min(d, BackoffMax), n >= CrashLoopDeaths
}
