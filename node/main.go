package node

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"ringkv/internal/version"
	"ringkv/node/admin"
)

// Main is kvnode: it parses args (without the program name), runs the node until SIGTERM
// or SIGINT, drains and returns the exit code: 0 after a clean shutdown, 2 for bad flags,
// 1 for any other failure.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return run(ctx, args, os.Stderr)
}

// run is Main until ctx ends (Main's ctx ends at SIGTERM or SIGINT). `kvnode health`
// probes a running node instead.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "health" {
		return probe(ctx, args[1:], os.Stdout, stderr)
	}
	cfg := DefaultConfig()
	fs := cfg.FlagSet("kvnode")
	showVersion := fs.Bool("version", false, "print the version (module version and VCS revision) and exit")
	logFormat := fs.String("log-format", "text", "log line format: text (key=value) or json")
	fs.SetOutput(io.Discard)
	if code, stop := parseFlags(fs, args, "kvnode", "usage: kvnode [flags]\n       kvnode health [--admin ADDR] [--certs-dir DIR]   exit 0 when the node is ready", stderr); stop {
		return code
	}
	if *showVersion {
		fmt.Fprintf(stderr, "kvnode %s\n", version.Get())
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kvnode: unexpected argument %q (flags only)\n", fs.Arg(0))
		return 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "kvnode: %v\n", err)
		return 2
	}
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	var handler slog.Handler
	switch *logFormat {
	case "text":
		handler = slog.NewTextHandler(stderr, opts)
	case "json":
		handler = slog.NewJSONHandler(stderr, opts)
	default:
		fmt.Fprintf(stderr, "kvnode: --log-format %q: want text or json\n", *logFormat)
		return 2
	}
	logger := slog.New(handler)
	admin.KeepMutexWaitsTimed() // so that a mutex capture sees contention older than itself
	n, err := New(cfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "kvnode: %v\n", err)
		if errors.Is(err, ErrInvalidConfig) {
			return 2
		}
		return 1
	}
	if err := n.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "kvnode: %v\n", err)
		return 1
	}
	return 0
}

// parseFlags parses args into fs (whose output is discarded). On -h/--help it prints usage
// and the flags' defaults to stderr; on a bad flag, one line naming it. stop tells the caller
// to exit with code: 0 after help, 2 for a bad flag.
func parseFlags(fs *flag.FlagSet, args []string, name, usage string, stderr io.Writer) (code int, stop bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stderr)
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
		return 0, true
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return 2, true
}
