package cli

import (
	"os"
)

// Caller names the person at this kvctl for what the cluster journals (who paused a ring
// change): "$USER@host", "kvctl@host" without $USER. A node names a caller with a client
// certificate by the certificate instead.
func Caller() string {
	user := os.Getenv("USER")
	if user == "" {
		user = "kvctl"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return user + "@" + host
}
