package deploy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"ringkv/internal/eventually"
)

// promFor is the `for:` of every rule in the compose test's copy of the rules, instead of
// their minutes: so that the node-down alert fires within seconds of n3 stopping.
const promFor = "10s"

var forLine = regexp.MustCompile(`(?m)^(\s*)for: .*$`)

// TestComposeMonitoring: deploy/up.sh --monitoring starts Prometheus beside n1..n3 (its image
// built from the host's Debian binary); it loads every alert of deploy/monitoring/rules and
// reports three healthy targets scraped over mutual TLS. Stopping n3 fires RingkvNodeDown
// for n3 within the rule's `for` (shortened to 10 s in the test's copy of the rules) plus a
// minute; starting n3 again clears it. Skipped without a Docker engine, without the
// prometheus package on the host, or with -short.
func TestComposeMonitoring(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: no containers")
	}
	if _, err := exec.LookPath("prometheus"); err != nil {
		t.Skip("no prometheus binary on the host (apt-get install prometheus; .ci/run installs it): the monitoring profile is not tested")
	}
	rules := shortRules(t)
	port := freePort(t)
	image := fmt.Sprintf("ringkv-prometheus:test%d", os.Getpid())
	env := []string{"RINGKV_PROMETHEUS_PORT=" + strconv.Itoa(port), "RINGKV_PROMETHEUS_RULES=" + rules, "RINGKV_PROMETHEUS_IMAGE=" + image}
	t.Cleanup(func() { // after down.sh (cleanups run last registered first)
		if out, err := exec.Command("docker", "rmi", image).CombinedOutput(); err != nil {
			t.Logf("docker rmi %s: %v %s", image, err, out)
		}
	})
	c := startCompose(t, env, "--monitoring")
	prom := fmt.Sprintf("http://127.0.0.1:%d", port)
	hc := &http.Client{Timeout: 5 * time.Second}

	alertNames := promAlertNames(t)
	eventually.Succeeds(t, 60*time.Second, func() error {
		var r struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name string `json:"name"`
						Type string `json:"type"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		if err := promGet(hc, prom+"/api/v1/rules", &r); err != nil {
			return err
		}
		loaded := map[string]bool{}
		for _, g := range r.Data.Groups {
			for _, rl := range g.Rules {
				if rl.Type == "alerting" {
					loaded[rl.Name] = true
				}
			}
		}
		for _, a := range alertNames {
			if !loaded[a] {
				return fmt.Errorf("alert %s not loaded (%d loaded)", a, len(loaded))
			}
		}
		return nil
	})

	eventually.Succeeds(t, 60*time.Second, func() error {
		var r struct {
			Data struct {
				ActiveTargets []struct {
					Labels    map[string]string `json:"labels"`
					ScrapeURL string            `json:"scrapeUrl"`
					Health    string            `json:"health"`
					LastError string            `json:"lastError"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		if err := promGet(hc, prom+"/api/v1/targets", &r); err != nil {
			return err
		}
		up := 0
		var last string
		for _, tg := range r.Data.ActiveTargets {
			if tg.Labels["job"] != "ringkv" {
				continue
			}
			if tg.Health == "up" && strings.HasPrefix(tg.ScrapeURL, "https://") {
				up++
			} else {
				last = fmt.Sprintf("%s: %s %s", tg.ScrapeURL, tg.Health, tg.LastError)
			}
		}
		if up != 3 {
			return fmt.Errorf("got %d healthy ringkv targets over https, want 3 (%s)", up, last)
		}
		return nil
	})
	if state := nodeDownAlert(t, hc, prom, "n3:7070"); state != "" {
		t.Fatalf("RingkvNodeDown for n3 before it stopped: %s", state)
	}

	n3 := c.container(t, 3)
	if out, err := exec.Command("docker", "stop", "--time", "30", n3).CombinedOutput(); err != nil {
		t.Fatalf("docker stop n3: %v %s", err, out)
	}
	stopped := time.Now()
	eventually.Succeeds(t, 10*time.Second+time.Minute, func() error {
		if state := nodeDownAlert(t, hc, prom, "n3:7070"); state != "firing" {
			return fmt.Errorf("RingkvNodeDown for n3: got %q, want firing", state)
		}
		return nil
	})
	t.Logf("RingkvNodeDown fired %v after n3 stopped (for: %s, scrape and evaluation every 5s)", time.Since(stopped).Round(time.Second), promFor)
	for _, other := range []string{"n1:7070", "n2:7070"} {
		if state := nodeDownAlert(t, hc, prom, other); state != "" {
			t.Errorf("RingkvNodeDown for %s, which runs: %s", other, state)
		}
	}

	if out, err := exec.Command("docker", "start", n3).CombinedOutput(); err != nil {
		t.Fatalf("docker start n3: %v %s", err, out)
	}
	started := time.Now()
	eventually.Succeeds(t, 90*time.Second, func() error {
		if state := nodeDownAlert(t, hc, prom, "n3:7070"); state != "" {
			return fmt.Errorf("RingkvNodeDown for n3 after its start: got %q, want none", state)
		}
		return nil
	})
	t.Logf("RingkvNodeDown cleared %v after n3 started", time.Since(started).Round(time.Second))
}

// shortRules copies deploy/monitoring/rules/*.yml to a directory Prometheus (user 65534 in
// its container) can read, with every `for:` set to promFor.
func shortRules(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("monitoring/rules/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("monitoring/rules/*.yml: got %v %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = forLine.ReplaceAll(b, []byte("${1}for: "+promFor))
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var alertLine = regexp.MustCompile(`(?m)^\s*- alert: (\S+)\s*$`)

// promAlertNames are the alerts of deploy/monitoring/rules/alerts.yml.
func promAlertNames(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("monitoring/rules/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range alertLine.FindAllSubmatch(b, -1) {
		out = append(out, string(m[1]))
	}
	if len(out) == 0 {
		t.Fatal("monitoring/rules/alerts.yml: no alerts")
	}
	return out
}

// nodeDownAlert is the state of RingkvNodeDown for instance ("pending", "firing"), "" when
// there is none.
func nodeDownAlert(t *testing.T, hc *http.Client, prom, instance string) string {
	t.Helper()
	var r struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := promGet(hc, prom+"/api/v1/alerts", &r); err != nil {
		return "error: " + err.Error()
	}
	for _, a := range r.Data.Alerts {
		if a.Labels["alertname"] == "RingkvNodeDown" && a.Labels["instance"] == instance {
			return a.State
		}
	}
	return ""
}

func promGet(hc *http.Client, url string, v any) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
