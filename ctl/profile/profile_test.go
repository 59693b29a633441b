package profile

import (
	"reflect"
	"testing"

	"github.com/google/pprof/profile"
)

func TestTop(t *testing.T) {
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	leaf, mid, root := fn(1, "pkg.leaf"), fn(2, "pkg.mid"), fn(3, "pkg.root")
	loc := func(id uint64, fs ...*profile.Function) *profile.Location {
		l := &profile.Location{ID: id}
		for _, f := range fs {
			l.Line = append(l.Line, profile.Line{Function: f})
		}
		return l
	}
	lLeaf, lMid, lRoot := loc(1, leaf), loc(2, mid), loc(3, root)
	lInlined := loc(4, leaf, mid) // leaf inlined into mid
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{lLeaf, lMid, lRoot}, Value: []int64{1, 30}},
			{Location: []*profile.Location{lMid, lRoot}, Value: []int64{1, 20}},
			{Location: []*profile.Location{lInlined, lRoot}, Value: []int64{1, 10}},
			{Location: []*profile.Location{lRoot, lRoot}, Value: []int64{1, 5}}, // recursion counts once
		},
	}
	rows, unit, total := Top(p, 0)
	want := []FuncRow{
		{Function: "pkg.leaf", Flat: 40, Cum: 40},
		{Function: "pkg.mid", Flat: 20, Cum: 60},
		{Function: "pkg.root", Flat: 5, Cum: 65},
	}
	if !reflect.DeepEqual(rows, want) || unit != "cpu nanoseconds" || total != 65 {
		t.Errorf("Top: got %v %q %d, want %v %q %d", rows, unit, total, want, "cpu nanoseconds", 65)
	}
	if rows, _, _ := Top(p, 2); len(rows) != 2 {
		t.Errorf("Top(2): got %d rows, want 2", len(rows))
	}
	p.DefaultSampleType = "samples"
	if _, unit, total := Top(p, 1); unit != "samples count" || total != 4 {
		t.Errorf("default sample type: got %q total %d, want %q total 4", unit, total, "samples count")
	}
}
