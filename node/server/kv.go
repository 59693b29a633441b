package server

import (
	"context"

	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// KV implements the client gRPC API over the coordinator.
type KV struct {
	kvpb.UnsafeKVServer
	d Data
}

var _ kvpb.KVServer = (*KV)(nil)

// NewKV returns the KV service on d.
func NewKV(d Data) *KV { return &KV{d: d} }

// entity is an RPC's key and ack/from (0 = default) once the node serves clients.
func (s *KV) entity(key []byte, ack, from uint32) (Entity, error) {
	if err := s.d.ready(); err != nil {
		return Entity{}, err
	}
	return Entity{Key: key, Ack: int(ack), From: int(from)}, nil
}

// Get returns the newest version of a key; NotFound when absent or deleted.
func (s *KV) Get(ctx context.Context, req *kvpb.GetRequest) (*kvpb.GetResponse, error) {
	e, err := s.entity(req.GetKey(), req.GetAck(), req.GetFrom())
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	rec, found, err := s.d.Coordinator.Get(ctx, e.Key, e.Ack, e.From)
	if err == nil && !found {
		err = ErrNotFound
	}
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	return &kvpb.GetResponse{Value: rec.Value, Timestamp: rec.TS}, nil
}

// Put writes a key.
func (s *KV) Put(ctx context.Context, req *kvpb.PutRequest) (*kvpb.PutResponse, error) {
	e, err := s.entity(req.GetKey(), req.GetAck(), req.GetFrom())
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	ts, err := s.d.Coordinator.Put(ctx, e.Key, req.GetValue(), e.Ack, e.From)
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	return &kvpb.PutResponse{Timestamp: ts}, nil
}

// Delete writes a tombstone for a key (absent keys included).
func (s *KV) Delete(ctx context.Context, req *kvpb.DeleteRequest) (*kvpb.DeleteResponse, error) {
	e, err := s.entity(req.GetKey(), req.GetAck(), req.GetFrom())
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	ts, err := s.d.Coordinator.Delete(ctx, e.Key, e.Ack, e.From)
	if err != nil {
		return nil, rpcerr.Encode(err)
	}
	return &kvpb.DeleteResponse{Timestamp: ts}, nil
}
