//go:build !race

package gcfloor

const raceEnabled = false
