package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"ringkv/ctl/cli"
	"ringkv/ctl/present"
	"ringkv/loadgen"
)

// DiffOptions are bench diff's arguments.
type DiffOptions struct {
	IO       *cli.IOStreams
	Old, New string
}

// NewCmdDiff returns `kvctl bench diff OLD.json NEW.json`. runF replaces the run step in tests.
func NewCmdDiff(f *cli.Factory, runF func(*DiffOptions) error) *cobra.Command {
	o := &DiffOptions{IO: f.IO}
	return &cobra.Command{
		Use:   "diff OLD.json NEW.json",
		Short: "Print the change in rate and latency percentiles between two bench --json results, phase by phase",
		Example: `  kvctl bench --rate 5000 --json > before.json
  # ... change something ...
  kvctl bench --rate 5000 --json > after.json
  kvctl bench diff before.json after.json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return cli.UsageErrorf("bench diff takes two files: OLD.json NEW.json")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Old, o.New = args[0], args[1]
			if runF != nil {
				return runF(o)
			}
			return runDiff(o)
		},
	}
}

// readReport reads a bench --json file; a file that is not there is "not found" (exit 4),
// one that is not a bench report a usage error (exit 2), each in one line.
func readReport(path string) (loadgen.Report, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return loadgen.Report{}, fmt.Errorf("%w: %s: no such file", cli.ErrNotFound, path)
	}
	if err != nil {
		return loadgen.Report{}, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	rep, err := loadgen.ReadReport(f)
	if err != nil {
		return loadgen.Report{}, cli.UsageErrorf("%s is not a kvctl bench --json result: %s", path, present.OneLine(err))
	}
	return rep, nil
}

func runDiff(o *DiffOptions) error {
	old, err := readReport(o.Old)
	if err != nil {
		return err
	}
	new, err := readReport(o.New)
	if err != nil {
		return err
	}
	return loadgen.WriteDiff(o.IO.Out, old, new)
}
