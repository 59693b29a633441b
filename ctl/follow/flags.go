package follow

import (
	"time"

	"github.com/spf13/cobra"
)

// AddFlags adds the flags of a command that follows an operation to cmd: --interval (how
// often progress is refreshed) and --reconnect (how long a lost watch is retried).
func AddFlags(cmd *cobra.Command, interval, reconnect *time.Duration) {
	fl := cmd.Flags()
	fl.DurationVar(interval, "interval", time.Second, "how often progress is refreshed")
	fl.DurationVar(reconnect, "reconnect", 30*time.Second, "how long to retry a lost watch")
}
