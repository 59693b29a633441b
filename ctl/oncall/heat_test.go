package oncall

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"ringkv/proto/kvpb"
)

// TestMergeNoData: steps no node saw are null, and a window with none is ErrNoData.
func TestMergeNoData(t *testing.T) {
	rep := &kvpb.HeatResponse{Node: "n1", StepSeconds: 10, Buckets: 256, ColumnsUnixNanos: []int64{0, 10e9}, Present: []bool{false, false}, Values: make([]uint64, 512)}
	_, err := MergeHeat([]*kvpb.HeatResponse{rep}, "ops")
	if err == nil || !errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), "no data since") {
		t.Fatalf("got %v, want no data", err)
	}
	rep2 := &kvpb.HeatResponse{Node: "n2", StepSeconds: 10, Buckets: 256, ColumnsUnixNanos: []int64{10e9}, Present: []bool{true}, Values: make([]uint64, 256)}
	rep2.Values[3] = 7
	res, err := MergeHeat([]*kvpb.HeatResponse{rep, rep2}, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if res.Values[3][0] != nil || res.Values[3][1] == nil || *res.Values[3][1] != 7 || res.Values[4][1] == nil || *res.Values[4][1] != 0 {
		t.Errorf("got %v %v, want no data then 7, and zero elsewhere", res.Values[3], res.Values[4])
	}
}

// TestMergeEvents: an event every node kept (a ring change) or several did (a peer DOWN, seen
// seconds apart) is listed once with the nodes that kept it; the same text later is another.
func TestMergeEvents(t *testing.T) {
	at := func(s int) int64 { return time.Unix(1_800_000_000+int64(s), 0).UnixNano() }
	rep := func(node string, evs ...*kvpb.HeatEvent) *kvpb.HeatResponse {
		return &kvpb.HeatResponse{Node: node, StepSeconds: 10, Buckets: 256, ColumnsUnixNanos: []int64{at(0)}, Present: []bool{true}, Values: make([]uint64, 256), Events: evs}
	}
	begin := &kvpb.HeatEvent{UnixNanos: at(1), Kind: "change-begin", Text: "ring change 7 begun: add n4, unpaced"}
	down := func(s int) *kvpb.HeatEvent {
		return &kvpb.HeatEvent{UnixNanos: at(s), Kind: "node-down", Text: "node n2 DOWN (unreachable)"}
	}
	res, err := MergeHeat([]*kvpb.HeatResponse{
		rep("n1", begin, down(5), down(100)),
		rep("n3", begin, down(7)),
	}, "ops")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range res.Events {
		got = append(got, fmt.Sprintf("%d %s %v", e.Time.Unix()-1_800_000_000, e.Kind, e.Nodes))
	}
	want := []string{"1 change-begin [n1 n3]", "5 node-down [n1 n3]", "100 node-down [n1]"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got events %q, want %q", got, want)
	}
}
