//go:build race

package heat

const raceEnabled = true
