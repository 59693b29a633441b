package ctl

import (
	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/cmd/bench"
	"ringkv/ctl/cmd/cert"
	"ringkv/ctl/cmd/debug"
	"ringkv/ctl/cmd/demo"
	"ringkv/ctl/cmd/heat"
	"ringkv/ctl/cmd/hotkeys"
	"ringkv/ctl/cmd/kv"
	"ringkv/ctl/cmd/pprof"
	"ringkv/ctl/cmd/repair"
	ringcmd "ringkv/ctl/cmd/ring"
	"ringkv/ctl/cmd/status"
	tuicmd "ringkv/ctl/cmd/tui"
	"ringkv/ctl/cmd/vnodes"
)

// commands lists kvctl's top-level commands. Each lives in ctl/cmd/<noun>.
func commands(f *cli.Factory) []*cobra.Command {
	return []*cobra.Command{
		bench.NewCmdBench(f, nil),
		kv.NewCmdGet(f, nil),
		kv.NewCmdPut(f, nil),
		kv.NewCmdDel(f, nil),
		status.NewCmdStatus(f, nil),
		ringcmd.NewCmdRing(f),
		repair.NewCmdRepair(f, nil),
		pprof.NewCmdPprof(f, nil),
		hotkeys.NewCmdHotKeys(f, nil),
		vnodes.NewCmdVnodes(f, nil),
		heat.NewCmdHeat(f, nil),
		debug.NewCmdDebug(f, nil),
		demo.NewCmdDemo(f, nil),
		tuicmd.NewCmdTUI(f, nil),
		cert.NewCmdCert(f, nil),
	}
}
