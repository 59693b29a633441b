// Command kvnode runs one ringkv node.
package main

import (
	"os"

	"ringkv/node"
)

func main() { os.Exit(node.Main(os.Args[1:])) }
