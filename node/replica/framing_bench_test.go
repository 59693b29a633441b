package replica

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"ringkv/proto/kvpb"
)

// The framing benchmarks measure what gRPC's HTTP/2 stream costs the replica transport beside
// the leanest frame over the same loopback TCP (issue 26, point 3): BenchmarkFramingGRPC sends
// BatchRequests of k write items on one Replica.Batch stream to a server that answers each
// with k write results, BenchmarkFramingRaw sends the same messages, proto-encoded, as
// length-prefixed frames over one TCP connection (no HTTP/2, no gRPC; a baseline, not a
// transport of the product). Both keep 8 messages in flight, build each request afresh as the
// batcher does, and report the process's CPU (user + system, both ends) per item:
//
//	go test -run '^$' -bench Framing -benchtime 20000x -count 3 ./node/replica
//
// No store and no coordinator: what is left of a replica item's cost in the cluster beside
// these figures is not the framing.

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func framingRequest(k int, base uint64) *kvpb.BatchRequest {
	req := &kvpb.BatchRequest{}
	for i := range k {
		req.Items = append(req.Items, &kvpb.BatchItem{Id: base + uint64(i), TimeoutNanos: int64(time.Second),
			Op: &kvpb.BatchItem_Write{Write: &kvpb.WriteRequest{Key: []byte(fmt.Sprintf("key%07d", i)),
				Record: &kvpb.Record{Timestamp: 1 << 50, Value: make([]byte, 100)}, Epoch: 3}}})
	}
	return req
}

func framingReply(req *kvpb.BatchRequest, resp *kvpb.BatchResponse) {
	resp.Results = resp.Results[:0]
	for _, it := range req.GetItems() {
		resp.Results = append(resp.Results, &kvpb.BatchResult{Id: it.GetId(),
			Result: &kvpb.BatchResult_Write{Write: &kvpb.WriteResponse{Applied: true, Epoch: 3, WallNanos: time.Now().UnixNano()}}})
	}
}

type framingServer struct {
	kvpb.UnimplementedReplicaServer
}

func (framingServer) Batch(s kvpb.Replica_BatchServer) error {
	var resp kvpb.BatchResponse
	for {
		req, err := s.Recv()
		if err != nil {
			return nil
		}
		framingReply(req, &resp)
		if err := s.Send(&resp); err != nil {
			return err
		}
	}
}

const framingWindow = 8

func runFraming(b *testing.B, k int, send func(*kvpb.BatchRequest) error, recv func() (int, error)) {
	msgs := b.N
	done := make(chan error, 1)
	sem := make(chan struct{}, framingWindow)
	go func() {
		for got := 0; got < msgs; got++ {
			n, err := recv()
			if err != nil || n != k {
				done <- fmt.Errorf("recv %d items: %v", n, err)
				return
			}
			<-sem
		}
		done <- nil
	}()
	start, c0 := time.Now(), cpuNow()
	for i := range msgs {
		sem <- struct{}{}
		// A fresh request per message, as the coordinator's batcher builds one from its calls.
		if err := send(framingRequest(k, uint64(i*k))); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	cpu, wall := cpuNow()-c0, time.Since(start)
	items := float64(msgs * k)
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/items, "cpu-µs/item")
	b.ReportMetric(items/wall.Seconds(), "items/s")
}

func BenchmarkFramingGRPC(b *testing.B) {
	for _, k := range []int{1, 4, 16} {
		b.Run(fmt.Sprint("items=", k), func(b *testing.B) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			s := grpc.NewServer()
			kvpb.RegisterReplicaServer(s, framingServer{})
			go s.Serve(lis)
			defer s.Stop()
			cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			st, err := kvpb.NewReplicaClient(cc).Batch(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			runFraming(b, k, st.Send, func() (int, error) {
				r, err := st.Recv()
				return len(r.GetResults()), err
			})
		})
	}
}

// writeFrame writes m as a raw frame: a 4-byte length and the proto message.
func writeFrame(w *bufio.Writer, buf []byte, m proto.Message) ([]byte, error) {
	buf, err := proto.MarshalOptions{}.MarshalAppend(append(buf[:0], 0, 0, 0, 0), m)
	if err != nil {
		return buf, err
	}
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	_, err = w.Write(buf)
	return buf, err
}

// readFrame reads one raw frame into buf.
func readFrame(r *bufio.Reader, buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return buf, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(r, buf)
	return buf, err
}

func BenchmarkFramingRaw(b *testing.B) {
	for _, k := range []int{1, 4, 16} {
		b.Run(fmt.Sprint("items=", k), func(b *testing.B) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer lis.Close()
			go func() {
				c, err := lis.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				r, w := bufio.NewReaderSize(c, 64<<10), bufio.NewWriterSize(c, 64<<10)
				var in, out []byte
				var resp kvpb.BatchResponse
				for {
					var err error
					if in, err = readFrame(r, in); err != nil {
						return
					}
					req := &kvpb.BatchRequest{}
					if err := proto.Unmarshal(in, req); err != nil {
						return
					}
					framingReply(req, &resp)
					if out, err = writeFrame(w, out, &resp); err != nil {
						return
					}
					if r.Buffered() == 0 { // nothing more read: answer now
						if w.Flush() != nil {
							return
						}
					}
				}
			}()
			c, err := net.Dial("tcp", lis.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			r, w := bufio.NewReaderSize(c, 64<<10), bufio.NewWriterSize(c, 64<<10)
			var out, in []byte
			b.ResetTimer()
			runFraming(b, k, func(m *kvpb.BatchRequest) error {
				var err error
				if out, err = writeFrame(w, out, m); err != nil {
					return err
				}
				return w.Flush()
			}, func() (int, error) {
				var err error
				if in, err = readFrame(r, in); err != nil {
					return 0, err
				}
				var resp kvpb.BatchResponse
				err = proto.Unmarshal(in, &resp)
				return len(resp.Results), err
			})
		})
	}
}
