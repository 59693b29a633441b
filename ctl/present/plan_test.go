package present

import (
	"slices"
	"testing"

	"ringkv/proto/kvpb"
)

func TestPlanLines(t *testing.T) {
	p := &kvpb.ChangePlan{
		Request:   &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_ADD, NodeId: "n4", GrpcAddr: "h:4"},
		FromEpoch: 7, ToEpoch: 8,
		Moves:   make([]*kvpb.RangeMove, 3),
		EstKeys: 12500, EstBytes: 3 << 20,
		Before: []*kvpb.NodeOwnership{{Id: "n1", Share: 0.5, Vnodes: 8}, {Id: "n2", Share: 0.5, Vnodes: 8}},
		After: []*kvpb.NodeOwnership{{Id: "n1", Share: 0.375, Vnodes: 8}, {Id: "n2", Share: 0.375, Vnodes: 8},
			{Id: "n4", Share: 0.25, Vnodes: 8}},
		Warnings: []string{"n2 is slow"},
		Refusals: []string{"disk full on n4"},
	}
	want := []string{
		"epoch 7 → 8, 3 range moves, ~12k keys, ~3.0 MiB",
		"  n1         share  50.0% →  37.5%  vnodes 8 → 8",
		"  n2         share  50.0% →  37.5%  vnodes 8 → 8",
		"  n4         share   new →  25.0%  vnodes 0 → 8",
		"warning: n2 is slow",
		"refused: disk full on n4",
	}
	if got := PlanLines(p); !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	if got, want := WhatHappens(p.GetRequest()), "Node n4 at h:4 joins the ring and streams its new ranges in."; got != want {
		t.Errorf("WhatHappens: got %q, want %q", got, want)
	}
}

func TestCount(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 950: "950", 1234: "1.2k", 12500: "12k", 3.4e6: "3.4M", 1.2e9: "1.2G"} {
		if got := Count(v); got != want {
			t.Errorf("Count(%g): got %q, want %q", v, got, want)
		}
	}
}
