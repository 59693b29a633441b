// Package keys is the console's one key map, with the help text `?` shows.
package keys

import "charm.land/bubbles/v2/key"

// KeyMap holds every binding of the console. It implements help.KeyMap.
type KeyMap struct {
	NextView key.Binding
	PrevView key.Binding
	Overview key.Binding
	Heatmap  key.Binding
	Changes  key.Binding
	History  key.Binding

	Up     key.Binding
	Down   key.Binding
	Left   key.Binding
	Right  key.Binding
	Sort   key.Binding
	Metric key.Binding
	// HotKeys lists the hot keys of the heatmap's selected vnode; Zoom cycles the history
	// view's window (1h, 24h, 7d).
	HotKeys key.Binding
	Zoom    key.Binding

	Drain     key.Binding
	Add       key.Binding
	Rebalance key.Binding
	Profile   key.Binding
	Bench     key.Binding
	// Pause pauses the ring change in flight, or resumes the paused one (after a confirmation).
	Pause key.Binding
	// PauseRepair pauses the repair sessions, or resumes them (after a confirmation).
	PauseRepair key.Binding
	// StopNode and StartNode stop and start the selected node's process: only where the
	// console runs the nodes itself (the demo); disabled until SetNodeControl.
	StopNode  key.Binding
	StartNode key.Binding

	Confirm key.Binding
	Cancel  key.Binding
	Help    key.Binding
	Quit    key.Binding
}

// DefaultKeyMap returns the console's bindings.
func DefaultKeyMap() KeyMap {
	b := func(keys []string, k, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, desc))
	}
	return KeyMap{
		NextView: b([]string{"tab"}, "tab", "next view"),
		PrevView: b([]string{"shift+tab"}, "shift+tab", "previous view"),
		Overview: b([]string{"1"}, "1", "overview"),
		Heatmap:  b([]string{"2"}, "2", "shard heatmap"),
		Changes:  b([]string{"3"}, "3", "changes & events"),
		History:  b([]string{"4"}, "4", "history (heat over time)"),

		Up:      b([]string{"up"}, "↑", "select up"),
		Down:    b([]string{"down", "j"}, "↓/j", "select down"),
		Left:    b([]string{"left", "h"}, "←/h", "vnode left"),
		Right:   b([]string{"right", "l"}, "→/l", "vnode right"),
		Sort:    b([]string{"s"}, "s", "cycle sort column"),
		Metric:  b([]string{"m"}, "m", "cycle heatmap metric"),
		HotKeys: b([]string{"k"}, "k", "hot keys of selected vnode"),
		Zoom:    b([]string{"z"}, "z", "history zoom 1h/24h/7d"),

		Drain:       b([]string{"d"}, "d", "drain selected node"),
		Add:         b([]string{"a"}, "a", "add a node (ID=ADDR)"),
		Rebalance:   b([]string{"r"}, "r", "rebalance (plan first)"),
		Profile:     b([]string{"p"}, "p", "CPU profile selected node"),
		Bench:       b([]string{"b"}, "b", "start/stop background bench"),
		Pause:       b([]string{"P"}, "P", "pause/resume the ring change"),
		PauseRepair: b([]string{"R"}, "R", "pause/resume repair"),
		StopNode: key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "stop selected node (demo)"),
			key.WithDisabled()),
		StartNode: key.NewBinding(key.WithKeys("X"), key.WithHelp("X", "start selected node (demo)"),
			key.WithDisabled()),

		Confirm: b([]string{"y", "enter"}, "y/enter", "confirm"),
		Cancel:  b([]string{"n", "esc"}, "n/esc", "cancel"),
		Help:    b([]string{"?"}, "?", "toggle help"),
		Quit:    b([]string{"q", "ctrl+c"}, "q", "quit"),
	}
}

// SetReadonly disables (and hides from help) every action binding.
func (k *KeyMap) SetReadonly(readonly bool) {
	for _, a := range []*key.Binding{&k.Drain, &k.Add, &k.Rebalance, &k.Profile, &k.Bench, &k.Pause, &k.PauseRepair} {
		a.SetEnabled(!readonly)
	}
}

// SetNodeControl enables (and shows in help) the keys that stop and start a node's process.
func (k *KeyMap) SetNodeControl(on bool) {
	k.StopNode.SetEnabled(on)
	k.StartNode.SetEnabled(on)
}

// ShortHelp is the footer line.
func (k KeyMap) ShortHelp() []key.Binding {
	return []key.Binding{k.NextView, k.Sort, k.Metric, k.Help, k.Quit}
}

// FullHelp is every binding, grouped in columns.
func (k KeyMap) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.NextView, k.PrevView, k.Overview, k.Heatmap, k.Changes, k.History},
		{k.Up, k.Down, k.Left, k.Right, k.Sort, k.Metric, k.HotKeys, k.Zoom},
		{k.Drain, k.Add, k.Rebalance, k.Pause, k.PauseRepair, k.Profile, k.Bench, k.StopNode, k.StartNode},
		{k.Confirm, k.Cancel, k.Help, k.Quit},
	}
}
