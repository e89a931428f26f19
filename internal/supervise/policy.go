package supervise

import "time"

// The restart policy: a serving process that lived QuickDeath or longer
// is restarted at once, and so is the first of those that died sooner;
// each further quick death in a row waits twice as long as the one
// before, from BackoffStart up to BackoffMax: the back-off is for a
// process that dies again at once (a bad start), not for one that served
// and was killed (an OOM kill under a flood, a kill -9), whose restart is
// what keeps the node's DNS answering. CrashLoopDeaths deaths of any kind
// in CrashWindow is a crash loop, reported (readiness, doctor, a metric)
// until a serving process lives CrashWindow.
const (
	CrashWindow     = 60 * time.Second
	CrashLoopDeaths = 3
	QuickDeath      = 10 * time.Second
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
	loop := len(deaths) >= CrashLoopDeaths
	quick := 0 // the quick deaths in a row at the end
	for i := len(deaths) - 1; i >= 0 && deaths[i].Lived < QuickDeath; i-- {
		quick++
	}
	if quick <= 1 {
		return 0, loop
	}
	d := BackoffStart
	for i := 2; i < quick && d < BackoffMax; i++ {
		d *= 2
	}
	return min(d, BackoffMax), loop
}
