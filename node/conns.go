package node

import (
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"ringkv/node/auth"
	"ringkv/node/replica"
	"ringkv/node/ring"
	"ringkv/node/server"
	"ringkv/proto/kvpb"
)

// conn returns the shared client connection to a peer, with the cluster secret attached.
func (n *Node) conn(addr string) (*grpc.ClientConn, error) {
	n.connsMu.Lock()
	defer n.connsMu.Unlock()
	if c, ok := n.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, n.dial...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	n.conns[addr] = c
	return c, nil
}

// msgLimit is the largest gRPC message a node sends or receives: a value at the limit plus room
// for the key and the envelope. Peers' client side uses it too, or a Replica.Read or a
// StreamRange chunk of a large value would fail at gRPC's default 4 MiB.
func msgLimit(cfg Config) int { return int(max(cfg.MaxValueSize, 4<<20)) + 64<<10 }

// dialOptions are the options of every connection to a peer: reconnect within ~2s, mutual
// TLS when creds are given (nil = plaintext), and the cluster secret on every call when one
// is configured.
func dialOptions(secret string, limit int, creds credentials.TransportCredentials) []grpc.DialOption {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(limit), grpc.MaxCallSendMsgSize(limit)),
		// Fixed flow-control windows (see server.StreamWindow) turn off gRPC's bandwidth-delay
		// estimator, whose PING and PING ack cost two write syscalls per replica message at low load.
		grpc.WithInitialWindowSize(server.StreamWindow),
		grpc.WithInitialConnWindowSize(server.ConnWindow),
		// Reconnect to a restarted peer within ~2s rather than gRPC's default backoff of up to 2m.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: time.Second,
		}),
	}
	if secret != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.Secret(secret)))
	}
	return opts
}

// peer is the coordinator's Replica for another member (nil when it cannot be dialed).
func (n *Node) peer(m ring.Member) replica.Replica {
	n.connsMu.Lock()
	r, ok := n.remotes[m.Addr]
	n.connsMu.Unlock()
	if ok {
		return r
	}
	c, err := n.conn(m.Addr)
	if err != nil {
		n.logger.Warn("dial peer", "peer", m.ID, "err", err)
		return nil
	}
	n.connsMu.Lock()
	defer n.connsMu.Unlock()
	if r, ok := n.remotes[m.Addr]; ok {
		return r
	}
	r = replica.NewRemote(c, n.epoch, replica.OnEpoch(n.sawEpoch), replica.CountBatches(&n.batches), replica.OnClock(func(sent, received, remote time.Time) {
		n.sawClock(m.ID, sent, received, remote)
	}))
	n.remotes[m.Addr] = r
	return r
}

// peerDialer is the node's connections as a peers.Dialer.
type peerDialer struct{ n *Node }

func (d peerDialer) Admin(addr string) (kvpb.AdminClient, error) { return d.n.peerAdmin(addr) }

func (d peerDialer) Replica(addr string) (kvpb.ReplicaClient, error) {
	c, err := d.n.conn(addr)
	if err != nil {
		return nil, err
	}
	return kvpb.NewReplicaClient(c), nil
}

func (n *Node) peerAdmin(addr string) (kvpb.AdminClient, error) {
	c, err := n.conn(addr)
	if err != nil {
		return nil, err
	}
	return kvpb.NewAdminClient(c), nil
}
