// Package auth carries the cluster secret on gRPC calls: the metadata key every side reads
// (node/server's check) and the per-RPC credentials that node peers and kvctl send.
package auth

import (
	"context"

	"google.golang.org/grpc/credentials"
)

// Header is the gRPC metadata key carrying the cluster secret.
const Header = "x-ringkv-secret"

// Secret is the cluster secret as per-RPC credentials: every call on a connection dialed
// with grpc.WithPerRPCCredentials(Secret(s)) carries s under Header. It asks for no
// transport security (the cluster speaks plain gRPC on a trusted network).
type Secret string

var _ credentials.PerRPCCredentials = Secret("")

// GetRequestMetadata returns the secret under Header.
func (s Secret) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{Header: string(s)}, nil
}

// RequireTransportSecurity is false: the secret goes over plain connections too.
func (s Secret) RequireTransportSecurity() bool { return false }
