package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"ringkv/proto/kvpb"
)

// The repair RPCs. Until the node wires its repair service in, they answer Unimplemented.

func (s *Admin) PlanRepair(context.Context, *kvpb.RepairRequest) (*kvpb.RepairPlan, error) {
	return nil, status.Error(codes.Unimplemented, "repair is not built into this node")
}

func (s *Admin) StartRepair(context.Context, *kvpb.RepairRequest) (*kvpb.RepairPlan, error) {
	return nil, status.Error(codes.Unimplemented, "repair is not built into this node")
}

func (s *Admin) RepairStatus(context.Context, *kvpb.RepairStatusRequest) (*kvpb.RepairProgress, error) {
	return nil, status.Error(codes.Unimplemented, "repair is not built into this node")
}

func (s *Admin) WatchRepair(*kvpb.RepairStatusRequest, kvpb.Admin_WatchRepairServer) error {
	return status.Error(codes.Unimplemented, "repair is not built into this node")
}

func (s *Admin) AbortRepair(context.Context, *kvpb.AbortRepairRequest) (*kvpb.RepairProgress, error) {
	return nil, status.Error(codes.Unimplemented, "repair is not built into this node")
}
