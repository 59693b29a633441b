package node

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ringkv/node/heat"
	"ringkv/node/hotkeys"
	"ringkv/node/latency"
	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/server"
)

// keyObserver feeds every client operation the coordinator answers to the on-call view: the
// hot keys summary (nil with --hot-keys=false), the heat history and the latency per vnode.
type keyObserver struct {
	hot  *hotkeys.Summary
	heat *heat.History
	lat  *latency.Tracker
	view func() *ring.View
}

var _ replica.KeyObserver = keyObserver{}

func (o keyObserver) ObserveKey(op replica.Op, key []byte, token uint64, n int, d time.Duration, err error) {
	write := op != replica.OpGet
	var vnode uint64
	if v := o.view(); o.hot != nil && v != nil && v.Current != nil {
		vnode = v.Current.Vnode(token)
	}
	if o.hot != nil {
		o.hot.Record(token, vnode, key, write, n)
	}
	o.heat.Record(token, write, n, d, err != nil)
	o.lat.ObserveOp(token, write, d, err != nil)
}

// openOnCall builds the hot keys summary and opens the heat history (saved in the data
// directory unless the node is in memory).
func (n *Node) openOnCall(cfg Config) {
	if !cfg.HotKeysOff {
		kcfg := hotkeys.DefaultConfig()
		kcfg.Now = cfg.Now
		n.hot = hotkeys.New(kcfg)
	}
	n.lat = latency.New(latency.Config{Ring: n.currentRing, Now: cfg.Now})
	hcfg := heat.DefaultConfig()
	hcfg.Now = cfg.Now
	if !cfg.InMemory {
		hcfg.Dir = cfg.DataDir
	}
	h, err := heat.Open(hcfg)
	if err != nil {
		n.logger.Warn("heat history", "err", err)
	}
	n.heat = h
	n.heat.AddEvent(heat.KindNodeStart, fmt.Sprintf("%s started", cfg.ID))
}

// onCallGauges are the on-call view's per-node summaries for Prometheus: never a per-key or
// per-vnode label (those go through the Admin API).
func (n *Node) onCallGauges() []prometheus.Collector {
	hottest := func() (share, perSec float64) {
		if n.hot == nil {
			return 0, 0
		}
		rep, err := n.hot.Top(n.hot.SliceLen(), 1)
		if err != nil || rep.Ops == 0 || len(rep.Keys) == 0 {
			return 0, 0
		}
		return float64(rep.Keys[0].Count) / float64(rep.Ops), float64(rep.Keys[0].Count) / n.hot.SliceLen().Seconds()
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ringkv_hottest_key_share",
			Help: "Share of the operations this node coordinated in the last complete 10 s slice that went to its hottest key (an upper bound; kvctl hotkeys names the key).",
		}, func() float64 { s, _ := hottest(); return s }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "ringkv_hottest_key_ops_per_second",
			Help: "Operations per second on the hottest key this node coordinated in the last complete 10 s slice (an upper bound).",
		}, func() float64 { _, r := hottest(); return r }),
	}
}

// hotKeysDep is the summary as the Admin server's dependency: none (the RPC answers
// unimplemented) when the node keeps no summary.
func hotKeysDep(s *hotkeys.Summary) server.HotKeys {
	if s == nil {
		return nil
	}
	return s
}
