package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/loadgen"
	"ringkv/proto/kvpb"
	"ringkv/proto/rpcerr"
)

// ackRecord is one line of a --record file: an acknowledged PUT (Value) or DELETE (Deleted).
type ackRecord struct {
	Key     string `json:"key"`
	Value   []byte `json:"value_base64,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
}

// recorder appends acknowledged writes to a --record file. ack is called from every worker.
type recorder struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
	err error
}

func openRecorder(path string) (*recorder, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--record: %w", err)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	return &recorder{f: f, w: w, enc: json.NewEncoder(w)}, nil
}

func (r *recorder) ack(op loadgen.Op, key string, value []byte) {
	rec := ackRecord{Key: key, Value: value, Deleted: op == loadgen.OpDelete}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = r.enc.Encode(rec)
	}
}

func (r *recorder) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := errors.Join(r.err, r.w.Flush(), r.f.Close())
	if err != nil {
		return fmt.Errorf("--record %s: %w", r.f.Name(), err)
	}
	return nil
}

// ErrLostWrites is kvctl bench check's failure: an acknowledged write is not there.
var ErrLostWrites = errors.New("acknowledged writes lost")

// CheckOptions are bench check's arguments and flags.
type CheckOptions struct {
	IO      *cli.IOStreams
	KV      func() (kvpb.KVClient, error)
	JSON    func() bool
	File    string
	Ack     int
	From    int
	Workers int
	Timeout time.Duration
}

// CheckReport is bench check's result (-o json).
type CheckReport struct {
	Keys       int      `json:"keys"`
	Writes     int      `json:"writes"`
	Lost       int      `json:"lost"`
	Unreadable int      `json:"unreadable"`
	LostKeys   []string `json:"lost_keys,omitempty"`
	Errors     []string `json:"errors,omitempty"`
}

// NewCmdCheck returns `kvctl bench check FILE`. runF replaces the run step in tests.
func NewCmdCheck(f *cli.Factory, runF func(*CheckOptions) error) *cobra.Command {
	o := &CheckOptions{IO: f.IO, KV: func() (kvpb.KVClient, error) { return f.KV("") }, JSON: f.JSON, Workers: 16, Timeout: 5 * time.Second}
	cmd := &cobra.Command{
		Use:   "check FILE",
		Short: "Read back every write a bench --record file holds and count the lost ones",
		Long: `check reads every key of a kvctl bench --record file through the node at --addr, with
--ack and --from (a quorum: --ack 2 --from 3), and compares it with the writes that were
acknowledged. A key written once must hold exactly its value (or be absent after an
acknowledged delete); a key written several times must hold one of its acknowledged
values (concurrent writers: last-writer-wins picks one). A key that does not is lost; a
key that cannot be read is unreadable. Either exits 1.`,
		Example: `  kvctl bench --rate 200 --workload mixed:get=50,put=50 --key-dist sequential \
      --keys 10000000 --ack 2 --from 3 --record acked.jsonl
  kvctl bench check acked.jsonl --ack 2 --from 3`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cli.UsageErrorf("bench check takes one file: the --record file of a bench run")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.File = args[0]
			if o.Ack < 0 || o.From < 0 || (o.From > 0 && o.Ack > o.From) {
				return cli.UsageErrorf("--ack %d --from %d: want 0 <= ack <= from", o.Ack, o.From)
			}
			if o.Workers < 1 || o.Timeout <= 0 {
				return cli.UsageErrorf("--connections and --timeout must be positive")
			}
			if runF != nil {
				return runF(o)
			}
			return runCheck(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Ack, "ack", 0, "replicas that must answer each read (0 = the cluster's default)")
	fl.IntVar(&o.From, "from", 0, "replicas asked (0 = the replication factor)")
	fl.IntVarP(&o.Workers, "connections", "c", o.Workers, "reads in flight")
	fl.DurationVar(&o.Timeout, "timeout", o.Timeout, "deadline of each read")
	return cmd
}

// readRecords reads a --record file: for every key, the acknowledged writes in file order
// (a nil entry is a delete).
func readRecords(path string) (map[string][][]byte, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	keys := map[string][][]byte{}
	dec := json.NewDecoder(bufio.NewReader(f))
	n := 0
	for {
		var r ackRecord
		if err := dec.Decode(&r); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, 0, fmt.Errorf("%s: record %d: %w", path, n+1, err)
		}
		n++
		v := r.Value
		if r.Deleted {
			v = nil
		} else if v == nil {
			v = []byte{}
		}
		keys[r.Key] = append(keys[r.Key], v)
	}
	return keys, n, nil
}

func runCheck(ctx context.Context, o *CheckOptions) error {
	keys, writes, err := readRecords(o.File)
	if err != nil {
		return err
	}
	kv, err := o.KV()
	if err != nil {
		return err
	}
	rep := CheckReport{Keys: len(keys), Writes: writes}
	var mu sync.Mutex
	work := make(chan string)
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Go(func() {
			for key := range work {
				lost, rerr := checkKey(ctx, kv, o, key, keys[key])
				mu.Lock()
				switch {
				case rerr != nil:
					rep.Unreadable++
					if len(rep.Errors) < 10 {
						rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %s", key, rerr))
					}
				case lost:
					rep.Lost++
					rep.LostKeys = append(rep.LostKeys, key)
				}
				mu.Unlock()
			}
		})
	}
	for key := range keys {
		work <- key
	}
	close(work)
	wg.Wait()
	slices.Sort(rep.LostKeys)
	if o.JSON != nil && o.JSON() {
		if err := cli.PrintJSON(o.IO.Out, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(o.IO.Out, "checked %d keys (%d acknowledged writes) at ack=%d from=%d: %d lost, %d unreadable\n",
			rep.Keys, rep.Writes, o.Ack, o.From, rep.Lost, rep.Unreadable)
		for i, k := range rep.LostKeys {
			if i == 10 {
				fmt.Fprintf(o.IO.Out, "lost: ... and %d more\n", len(rep.LostKeys)-10)
				break
			}
			fmt.Fprintf(o.IO.Out, "lost: %s\n", k)
		}
		for _, e := range rep.Errors {
			fmt.Fprintf(o.IO.Out, "unreadable: %s\n", e)
		}
	}
	if rep.Lost > 0 || rep.Unreadable > 0 {
		return fmt.Errorf("%w: %d of %d keys lost, %d unreadable", ErrLostWrites, rep.Lost, rep.Keys, rep.Unreadable)
	}
	return nil
}

// checkKey reads key and tells whether its acknowledged writes are lost: written once, the
// value must be that write's (absent for a delete); written more, one of them.
func checkKey(ctx context.Context, kv kvpb.KVClient, o *CheckOptions, key string, acked [][]byte) (lost bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	resp, err := kv.Get(rctx, &kvpb.GetRequest{Key: []byte(key), Ack: uint32(o.Ack), From: uint32(o.From)})
	var got []byte // nil: absent
	switch {
	case rpcerr.ReasonOf(err) == kvpb.Reason_REASON_NOT_FOUND:
	case err != nil:
		return false, err
	default:
		got = resp.GetValue()
		if got == nil {
			got = []byte{}
		}
	}
	for _, v := range acked {
		if (v == nil) == (got == nil) && string(v) == string(got) {
			return false, nil
		}
	}
	return true, nil
}
