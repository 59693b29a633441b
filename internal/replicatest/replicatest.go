// Package replicatest reads a node's own store in tests, over the Replica API.
package replicatest

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"

	"ringkv/proto/kvpb"
)

// Held scans the store of the node at cc over Replica.StreamRange of the whole ring (a local
// scan, not client reads): every record it holds, by key (its value, or "" for a tombstone).
func Held(ctx context.Context, cc grpc.ClientConnInterface) (map[string]string, error) {
	s, err := kvpb.NewReplicaClient(cc).StreamRange(ctx, &kvpb.StreamRangeRequest{Start: 0, End: 0})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		for _, kr := range chunk.GetRecords() {
			v := string(kr.GetRecord().GetValue())
			if kr.GetRecord().GetTombstone() {
				v = ""
			}
			out[string(kr.GetKey())] = v
		}
		if chunk.GetLast() {
			return out, nil
		}
	}
}
