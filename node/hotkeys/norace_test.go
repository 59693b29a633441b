//go:build !race

package hotkeys

const raceEnabled = false
