//go:build race

package hotkeys

const raceEnabled = true
