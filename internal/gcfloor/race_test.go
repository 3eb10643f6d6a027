//go:build race

package gcfloor

// raceEnabled: the race detector maps shadow memory for each heap page
// a test touches, so page faults no longer count the heap's own pages.
const raceEnabled = true
