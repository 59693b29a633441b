// Command kvctl is the operator console of a ringkv cluster.
package main

import (
	"os"

	"ringkv/ctl"
)

func main() { os.Exit(ctl.Main(os.Args[1:])) }
