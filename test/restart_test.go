package test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"testing"
	"time"

	"ringkv/internal/spin"
	"ringkv/proto/kvpb"
)

// TestRestartedReplicaUsedAtOnce: 2 kvnode processes, RF=2. n2 is killed; ack=1 writes
// through n1 open n1's breaker for it; n2 restarts on its data and, as soon as its
// /v0/status answers 200, ack=2 writes through n1 succeed: the first one and one every
// 50 ms after it, with no 504 window. Three rounds, on a quiet machine and with every
// core kept busy by spin loops (not under -short). Every acknowledged write is then read
// back from both.
func TestRestartedReplicaUsedAtOnce(t *testing.T) {
	for _, load := range []string{"quiet", "busy"} {
		t.Run(load, func(t *testing.T) {
			if load == "busy" {
				// Every core spun: under -short (the inner loop) the quiet round only, as
				// node's Busy cases.
				long(t)
				spin.Cores(t)
			}
			c := startCluster(t, 2, 0)
			n1, n2 := c.nodes[0], c.nodes[1]
			acked := map[string]string{}
			put := func(p *proc, key, value string, ack int) (int, string) {
				code, body, err := request("PUT", fmt.Sprintf("http://%s/v0/entity?id=%s&ack=%d", p.http, key, ack), []byte(value))
				if err != nil {
					t.Fatalf("PUT %s via %s: %v", key, p.id, err)
				}
				if code == http.StatusCreated {
					acked[key] = value
				}
				return code, body
			}
			for round := range 3 {
				c.kill(n2)
				for i := range 10 {
					key := fmt.Sprintf("r%d-down-%d", round, i)
					if code, body := put(n1, key, "v-"+key, 1); code != http.StatusCreated {
						t.Fatalf("round %d: PUT ack=1 with n2 down: got %d %q, want 201", round, code, body)
					}
				}
				waitFor(t, 10*time.Second, "n1's breaker for n2 open", func() error {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					info, err := c.admin(n1).NodeInfo(ctx, &kvpb.NodeInfoRequest{})
					if err != nil {
						return err
					}
					for _, b := range info.GetBreakers() {
						if b.GetPeer() == n2.id && b.GetState() == kvpb.BreakerState_OPEN {
							return nil
						}
					}
					return fmt.Errorf("breakers %v", info.GetBreakers())
				})

				c.restart(n2)
				waitFor(t, 30*time.Second, "n2's /v0/status 200", func() error {
					code, body, err := request("GET", "http://"+n2.http+"/v0/status", nil)
					if err != nil {
						return err
					}
					if code != http.StatusOK {
						return fmt.Errorf("got %d %q", code, body)
					}
					return nil
				})
				ready := time.Now()
				for i := range 20 {
					key := fmt.Sprintf("r%d-up-%d", round, i)
					if code, body := put(n1, key, "v-"+key, 2); code != http.StatusCreated {
						t.Fatalf("round %d: PUT ack=2 #%d, %v after n2 was ready: got %d %q, want 201",
							round, i, time.Since(ready).Round(time.Millisecond), code, body)
					}
					time.Sleep(50 * time.Millisecond) // the scenario's pace, not a wait for a state
				}
			}
			// No acknowledged write is lost: each is on both replicas.
			for key, want := range acked {
				for _, p := range []*proc{n1, n2} {
					code, body, err := request("GET", fmt.Sprintf("http://%s/v0/entity?id=%s&ack=2", p.http, key), nil)
					if err != nil || code != http.StatusOK || body != want {
						t.Fatalf("GET %s ack=2 via %s: got %d %q (%v), want 200 %q", key, p.id, code, body, err, want)
					}
				}
			}
			t.Logf("%d acknowledged writes read back through both nodes", len(acked))
		})
	}
}

// flappingOnly matches a /readyz answer whose only problem is that n3 is named flapping.
var flappingOnly = regexp.MustCompile(`^gray: n3 flapping: [^;]*$`)

// TestRestartedReadyWhenReached: a restarted node answers /readyz 200 only once its peers
// reach it again, not as soon as it reaches them (their connections to it wait out a
// reconnect backoff): a write with ack=3 through a peer succeeds the moment it is ready.
func TestRestartedReadyWhenReached(t *testing.T) {
	long(t)
	c := startCluster(t, 3, 0)
	n1, n3 := c.nodes[0], c.nodes[2]
	put := func(key string) (int, string) {
		code, body, err := request("PUT", fmt.Sprintf("http://%s/v0/entity?id=%s&ack=3", n1.http, key), []byte("v"))
		if err != nil {
			t.Fatalf("PUT %s via n1: %v", key, err)
		}
		return code, body
	}
	for round := range 3 {
		c.kill(n3)
		waitFor(t, 10*time.Second, "n1 unable to write ack=3 with n3 down", func() error {
			if code, body := put(fmt.Sprintf("r%d-down", round)); code != http.StatusGatewayTimeout {
				return fmt.Errorf("got %d %q", code, body)
			}
			return nil
		})
		c.restart(n3)
		// From the second round on n3 has gone, come back and gone again within a minute:
		// it is named flapping, and its /readyz says so for as long as that holds. That is
		// the only problem it may have: what is checked is that its peers reach it.
		waitFor(t, 30*time.Second, "n3's /readyz 200", func() error {
			code, body, err := request(http.MethodGet, "http://"+n3.admin+"/readyz", nil)
			switch {
			case err == nil && code == http.StatusOK:
			case err == nil && round > 0 && code == http.StatusServiceUnavailable && flappingOnly.MatchString(body):
			default:
				return fmt.Errorf("got %d %q (%v)", code, body, err)
			}
			return nil
		})
		if code, body := put(fmt.Sprintf("r%d-up", round)); code != http.StatusCreated {
			t.Fatalf("round %d: PUT ack=3 via n1 as n3 turned ready: got %d %q, want 201", round, code, body)
		}
	}
}
