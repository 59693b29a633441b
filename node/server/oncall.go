package server

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"ringkv/node/heat"
	"ringkv/node/hotkeys"
	"ringkv/node/replica"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// HotKeys is the node's hot keys summary (hotkeys.Summary). Safe for concurrent use.
type HotKeys interface {
	Top(window time.Duration, k int) (hotkeys.Report, error)
	// Live is the slice in progress (and the one before while it is young).
	Live(k int) hotkeys.Report
	// SliceLen is the shortest window, Window the longest; windows are whole slices.
	SliceLen() time.Duration
	Window() time.Duration
}

// HeatHistory is the node's heat history (heat.History). Safe for concurrent use.
type HeatHistory interface {
	Query(since time.Time, step time.Duration) (heat.View, error)
	// Steps are the steps kept, finest first; Span how far back one reaches.
	Steps() []time.Duration
	Span(step time.Duration) time.Duration
}

// Latency is what the node's coordinator saw of latency per vnode and per peer replica
// (latency.Tracker). Safe for concurrent use.
type Latency interface {
	Snapshot(node string) *kvpb.VnodesResponse
}

// Vnodes returns the latency this node's coordinator saw per vnode and per peer replica.
func (s *Admin) Vnodes(_ context.Context, _ *kvpb.VnodesRequest) (*kvpb.VnodesResponse, error) {
	if s.d.Latency == nil {
		return nil, rpcerr.Encode(ErrUnimplemented)
	}
	return s.d.Latency.Snapshot(s.d.Peers.Self), nil
}

// HotKeys returns the hottest keys this node coordinated in the window asked for.
func (s *Admin) HotKeys(_ context.Context, req *kvpb.HotKeysRequest) (*kvpb.HotKeysResponse, error) {
	if s.d.HotKeys == nil {
		return nil, rpcerr.Encode(ErrUnimplemented)
	}
	slice := s.d.HotKeys.SliceLen()
	var rep hotkeys.Report
	if req.GetLive() {
		rep = s.d.HotKeys.Live(int(req.GetLimit()))
	} else {
		w := time.Duration(req.GetWindowSeconds()) * time.Second
		if w == 0 {
			w = slice
		}
		if w%slice != 0 || w > s.d.HotKeys.Window() {
			return nil, rpcerr.Encode(fmt.Errorf("%w: hot keys window %v: want a multiple of %v up to %v", replica.ErrInvalidArgument, w, slice, s.d.HotKeys.Window()))
		}
		var err error
		if rep, err = s.d.HotKeys.Top(w, int(req.GetLimit())); err != nil {
			return nil, rpcerr.Encode(err)
		}
	}
	resp := &kvpb.HotKeysResponse{
		Node: s.d.Peers.Self, StartUnixNanos: rep.Start.UnixNano(), EndUnixNanos: rep.End.UnixNano(),
		Slices: uint32(rep.Slices), Ops: rep.Ops, Reads: rep.Reads, Writes: rep.Writes, Bytes: rep.Bytes,
		Floor: rep.Floor, SliceSeconds: uint32(slice / time.Second), MaxWindowSeconds: uint32(s.d.HotKeys.Window() / time.Second),
	}
	for v, n := range rep.Vnodes {
		resp.Vnodes = append(resp.Vnodes, &kvpb.VnodeOps{Token: v, Ops: n})
	}
	slices.SortFunc(resp.Vnodes, func(a, b *kvpb.VnodeOps) int { return cmp.Compare(a.GetToken(), b.GetToken()) })
	for _, k := range rep.Keys {
		resp.Keys = append(resp.Keys, &kvpb.HotKey{
			Key: k.Key, KeyLen: uint32(k.Len), Token: k.Token, Count: k.Count, Error: k.Error,
			Reads: k.Reads, Writes: k.Writes, Bytes: k.Bytes,
		})
	}
	return resp, nil
}

var heatMetrics = map[kvpb.HeatMetric]heat.Metric{
	kvpb.HeatMetric_HEAT_METRIC_UNSPECIFIED: heat.MetricOps,
	kvpb.HeatMetric_HEAT_METRIC_OPS:         heat.MetricOps,
	kvpb.HeatMetric_HEAT_METRIC_READS:       heat.MetricReads,
	kvpb.HeatMetric_HEAT_METRIC_WRITES:      heat.MetricWrites,
	kvpb.HeatMetric_HEAT_METRIC_BYTES:       heat.MetricBytes,
	kvpb.HeatMetric_HEAT_METRIC_P99:         heat.MetricP99,
	kvpb.HeatMetric_HEAT_METRIC_ERRORS:      heat.MetricErrors,
}

// Heat returns this node's load per token bucket and step since the time asked for.
func (s *Admin) Heat(_ context.Context, req *kvpb.HeatRequest) (*kvpb.HeatResponse, error) {
	if s.d.Heat == nil {
		return nil, rpcerr.Encode(ErrUnimplemented)
	}
	m, ok := heatMetrics[req.GetMetric()]
	if !ok {
		return nil, rpcerr.Encode(fmt.Errorf("%w: heat metric %v", replica.ErrInvalidArgument, req.GetMetric()))
	}
	since := time.Unix(0, req.GetSinceUnixNanos())
	steps := s.d.Heat.Steps()
	step := time.Duration(req.GetStepSeconds()) * time.Second
	if step == 0 {
		step = steps[len(steps)-1]
		for _, st := range steps {
			if time.Since(since) <= s.d.Heat.Span(st) {
				step = st
				break
			}
		}
	}
	if !slices.Contains(steps, step) {
		return nil, rpcerr.Encode(fmt.Errorf("%w: heat step %v: want one of %v", replica.ErrInvalidArgument, step, steps))
	}
	v, err := s.d.Heat.Query(since, step)
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	resp := &kvpb.HeatResponse{
		Node: s.d.Peers.Self, StepSeconds: uint32(step / time.Second), Metric: req.GetMetric(),
		Buckets: heat.Buckets, Present: v.Present, Values: make([]uint64, 0, len(v.Cells)),
	}
	for _, c := range v.Columns {
		resp.ColumnsUnixNanos = append(resp.ColumnsUnixNanos, c.UnixNano())
	}
	for _, c := range v.Cells {
		resp.Values = append(resp.Values, c.Value(m))
	}
	resp.Owners = make([]byte, len(v.Owners))
	for i, o := range v.Owners {
		if o == "" {
			continue
		}
		j := slices.Index(resp.OwnerNames, o)
		if j < 0 {
			j = len(resp.OwnerNames)
			resp.OwnerNames = append(resp.OwnerNames, o)
		}
		resp.Owners[i] = byte(min(j+1, 255))
	}
	for _, e := range v.Events {
		resp.Events = append(resp.Events, &kvpb.HeatEvent{UnixNanos: e.Time.UnixNano(), Kind: e.Kind, Text: e.Text})
	}
	return resp, nil
}
