// Command preload writes keys <prefix>START..<prefix>END-1 straight into a stopped node's store
// (its --data directory), as the node's own apply would (store.ApplyBatch: token order, last-write-wins,
// a hybrid logical clock timestamp of now), without the HTTP and replication path. It exists to
// build data sets of tens of millions of keys on a small machine in minutes instead of hours;
// a cluster whose every node holds every key (3 nodes, RF=3) is preloaded by running it on each
// node's directory. The benchmarks then measure through the cluster as usual.
//
//	go run ./bench/preload -data DIR -start 1000000 -end 10000000 [-value-size 100] [-prefix key]
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"ringkv/node/hlc"
	"ringkv/node/ring"
	"ringkv/node/store"
)

func main() {
	dir := flag.String("data", "", "the node's --data directory (the node must be stopped)")
	start := flag.Int64("start", 0, "first key number")
	end := flag.Int64("end", 0, "one past the last key number")
	size := flag.Int("value-size", 100, "value size in bytes")
	prefix := flag.String("prefix", "key", "key prefix")
	batch := flag.Int("batch", 1024, "entries per ApplyBatch call")
	flag.Parse()
	if *dir == "" || *end <= *start || *start < 0 || *size < 0 || *batch < 1 {
		fmt.Fprintln(os.Stderr, "preload: want -data DIR and 0 <= -start < -end")
		os.Exit(2)
	}
	if err := run(*dir, *start, *end, *size, *prefix, *batch); err != nil {
		fmt.Fprintln(os.Stderr, "preload:", err)
		os.Exit(1)
	}
}

func run(dir string, start, end int64, size int, prefix string, batch int) error {
	cfg := store.DefaultConfig()
	cfg.Dir, cfg.MinFreeDisk = dir, store.DefaultReserve
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := store.Open(cfg)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	clock := hlc.New(time.Now)
	rng := rand.New(rand.NewPCG(uint64(start), uint64(end)))
	val := make([]byte, size)
	for i := range val {
		val[i] = byte('a' + rng.IntN(26))
	}
	// SIGTERM or SIGINT (a time limit) stops at the next batch and closes the store cleanly;
	// the keys written so far are a prefix of the range, reported on stdout.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	t0, last := time.Now(), time.Now()
	entries := make([]store.Entry, 0, batch)
	n := start
	for n < end {
		select {
		case <-stop:
			end = n
			continue
		default:
		}
		entries = entries[:0]
		for ; n < end && len(entries) < batch; n++ {
			k := strconv.AppendInt([]byte(prefix), n, 10)
			entries = append(entries, store.Entry{Token: ring.Token(k), Key: k, Record: store.Record{TS: clock.Now(), Value: val}})
		}
		if _, err := st.ApplyBatch(entries); err != nil {
			st.Close()
			return fmt.Errorf("apply up to key %d: %w", n, err)
		}
		if time.Since(last) >= 10*time.Second {
			last = time.Now()
			fmt.Fprintf(os.Stderr, "%s: %d/%d keys, %.0f keys/s\n", dir, n-start, end-start, float64(n-start)/time.Since(t0).Seconds())
		}
	}
	el := time.Since(t0)
	if err := st.Close(); err != nil {
		return fmt.Errorf("close %s: %w", dir, err)
	}
	fmt.Printf("%s: preloaded %d keys %s%d..%s%d of %d B in %s (%.0f keys/s), closed in %s\n", dir, end-start,
		prefix, start, prefix, end-1, size, el.Round(time.Second), float64(end-start)/el.Seconds(), (time.Since(t0) - el).Round(time.Second))
	return nil
}
