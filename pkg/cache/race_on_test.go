//go:build race

package cache

// raceEnabled: built with -race, the program allocates what it otherwise
// does not (sync.Pool drops a share of what is put back on purpose, and
// the instrumentation), so allocation counts are not the program's.
const raceEnabled = true
