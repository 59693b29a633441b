package tui

import (
	"context"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// ChangeHistorian is a Source that can list the last finished ring changes with each node's
// load before, predicted and observed (kvctl ring history). Safe for concurrent use.
type ChangeHistorian interface {
	ChangeHistory(ctx context.Context, limit int) (*kvpb.ChangeHistoryResponse, error)
}

// ChangeHistory implements ChangeHistorian.
func (s *AdminSource) ChangeHistory(ctx context.Context, limit int) (*kvpb.ChangeHistoryResponse, error) {
	return each(ctx, s, "change history", func(c kvpb.AdminClient) (*kvpb.ChangeHistoryResponse, error) {
		return c.ChangeHistory(ctx, &kvpb.ChangeHistoryRequest{Limit: uint32(limit)})
	})
}

var _ ChangeHistorian = (*AdminSource)(nil)

// LastChangeMsg answers fetchLastChange: the last finished change, nil when none has
// finished (or the source keeps no history).
type LastChangeMsg struct {
	Record *kvpb.ChangeRecord
	Err    error
}

// fetchLastChange asks the source for the last finished change; nil when it keeps no history.
func (m Model) fetchLastChange() tea.Cmd {
	h, ok := m.opts.Source.(ChangeHistorian)
	if !ok {
		return nil
	}
	return rpc(DefaultRPCTimeout, func(ctx context.Context) tea.Msg {
		r, err := h.ChangeHistory(ctx, 1)
		if err != nil || len(r.GetChanges()) == 0 {
			return LastChangeMsg{Err: err}
		}
		return LastChangeMsg{Record: r.GetChanges()[0]}
	})
}

// onLastChange keeps the last finished change; an error keeps what was known.
func (m *Model) onLastChange(msg LastChangeMsg) {
	if msg.Err == nil && msg.Record != nil {
		m.lastChange = msg.Record
	}
}

// predictionView draws the last finished change's load per node, before -> predicted ->
// observed, with a node off by more than the tolerance flagged (kvctl ring history's table).
func (m Model) predictionView(b *strings.Builder) {
	r := m.lastChange
	if r == nil {
		return
	}
	lines := present.PredictionLines(r)
	b.WriteByte('\n')
	b.WriteString(m.st.Header.Render(ansi.Truncate("Last "+lines[0], max(1, m.width), "…")) + "\n")
	for _, l := range lines[1:] {
		l = ansi.Truncate(l, max(1, m.width), "…")
		if strings.Contains(l, present.OffFlag) {
			l = m.st.Down.Render(l)
		}
		b.WriteString(l + "\n")
	}
}
