package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/present"
	"ringkv/proto/kvpb"
)

// completeTimeout bounds the call a shell completion makes: a Tab press must not hang on a
// cluster that does not answer.
const completeTimeout = 2 * time.Second

// CompleteNodeIDs completes a node id (--node) with the members of the ring the node at
// --addr knows, described by state and address; nothing when it does not answer.
func (f *Factory) CompleteNodeIDs(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	c, err := f.Admin("")
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(context.Background(), completeTimeout)
	defer cancel()
	resp, err := c.Ring(ctx, &kvpb.RingRequest{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, m := range resp.GetRing().GetMembers() {
		if strings.HasPrefix(m.GetId(), toComplete) {
			out = append(out, cobra.CompletionWithDesc(m.GetId(), present.NodeState(m.GetState())+" "+m.GetGrpcAddr()))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// CompleteNodeArg completes a command's one argument, a node id (kvctl ring remove ID).
func (f *Factory) CompleteNodeArg(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return f.CompleteNodeIDs(cmd, args, toComplete)
}

// CompleteWords completes with a fixed list of words (profile kinds, output formats).
func CompleteWords(words ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, w := range words {
			if strings.HasPrefix(w, toComplete) {
				out = append(out, w)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
