// Package monitoring holds ringkv's Prometheus rules (rules/), their promtool unit tests
// (rules.test.yml) and the Grafana dashboard (dashboard.json). Its tests check the rules and
// the dashboard's queries with promtool, the runbook links against docs/operations.md, and every
// metric they name against a real node's /metrics.
package monitoring

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"ringkv/internal/clustertest"
	"ringkv/internal/eventually"
	"ringkv/node"
	"ringkv/node/store"
)

// promtool returns the path of promtool (Debian's prometheus package), or skips the test.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (apt-get install prometheus; .ci/run installs it): the rules and the dashboard's queries are not checked")
	}
	return p
}

func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func ruleFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("rules/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("rules/*.yml: got %v %v, want rule files", files, err)
	}
	return files
}

// TestRules: every rule file passes promtool check rules, and the unit tests of
// rules.test.yml (alerts that fire and alerts that must not) pass.
func TestRules(t *testing.T) {
	runPromtool(t, append([]string{"check", "rules"}, ruleFiles(t)...)...)
	runPromtool(t, "test", "rules", "rules.test.yml")
}

// rule is one rule of a rule file, read line by line (the files are ours and regular: no YAML
// library needed).
type rule struct {
	alert, record, expr string
	labels, annots      map[string]string
}

var keyLine = regexp.MustCompile(`^(\s*)(- )?([a-z_]+):\s*(.*)$`)

// readRules reads the rules of a rule file: name, expr (a one-line or a `|` block), and the
// one-level labels and annotations maps.
func readRules(t *testing.T, file string) []rule {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []rule
	var cur *rule
	var section map[string]string
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		m := keyLine.FindStringSubmatch(lines[i])
		if m == nil || strings.HasPrefix(strings.TrimSpace(lines[i]), "#") {
			continue
		}
		indent, key, val := len(m[1]), m[3], unquote(m[4])
		switch {
		case key == "alert" || key == "record":
			out = append(out, rule{labels: map[string]string{}, annots: map[string]string{}})
			cur, section = &out[len(out)-1], nil
			if key == "alert" {
				cur.alert = val
			} else {
				cur.record = val
			}
		case cur == nil:
		case key == "expr" && val == "|":
			var block []string
			for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || leading(lines[i+1]) > indent+2) {
				i++
				block = append(block, strings.TrimSpace(lines[i]))
			}
			cur.expr = strings.TrimSpace(strings.Join(block, " "))
		case key == "expr":
			cur.expr = val
		case key == "labels":
			section = cur.labels
		case key == "annotations":
			section = cur.annots
		case key == "for":
		case section != nil:
			section[key] = val
		}
	}
	return out
}

func leading(s string) int { return len(s) - len(strings.TrimLeft(s, " ")) }

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

func alerts(t *testing.T) []rule {
	t.Helper()
	var out []rule
	for _, f := range ruleFiles(t) {
		for _, r := range readRules(t, f) {
			if r.alert != "" {
				out = append(out, r)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no alert rules read")
	}
	return out
}

// TestAlertsRunbooks: every alert has a severity (critical or warning), a summary and a
// runbook_url pointing at a heading of docs/operations.md that exists, and a unit test in
// rules.test.yml.
func TestAlertsRunbooks(t *testing.T) {
	anchors := markdownAnchors(t, "../../docs/operations.md")
	if !anchors["monitoring"] {
		t.Errorf("docs/operations.md: no section \"Monitoring\"")
	}
	tests, err := os.ReadFile("rules.test.yml")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts(t) {
		if s := a.labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", a.alert, s)
		}
		if a.annots["summary"] == "" {
			t.Errorf("%s: no summary", a.alert)
		}
		doc, anchor, ok := strings.Cut(a.annots["runbook_url"], "#")
		if !ok || doc != "docs/operations.md" || !anchors[anchor] {
			t.Errorf("%s: runbook_url %q, want docs/operations.md#<a heading that exists>", a.alert, a.annots["runbook_url"])
		}
		if !bytes.Contains(tests, []byte("alertname: "+a.alert+"\n")) {
			t.Errorf("%s: no unit test in rules.test.yml", a.alert)
		}
	}
}

// markdownAnchors returns the anchors GitHub makes of a Markdown file's headings: lower case,
// punctuation dropped, spaces to hyphens.
func markdownAnchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	fence := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range title {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// dashboard is the part of Grafana's dashboard JSON that holds queries.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// dashboardExprs returns the dashboard's PromQL, by "panel/refId", with Grafana's variables
// replaced by what they stand for ($instance: every node; $__rate_interval: a range).
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	vars := strings.NewReplacer("$__rate_interval", "1m", "$instance", ".*")
	out := map[string]string{}
	for i, p := range d.Panels {
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q target %s: empty expr", p.Title, tg.RefID)
				continue
			}
			out[fmt.Sprintf("panel_%d_%s", i+1, tg.RefID)] = vars.Replace(tg.Expr)
		}
	}
	if len(out) == 0 {
		t.Fatal("dashboard.json: no queries")
	}
	return out
}

// dashboardCovers are what the dashboard must draw, by a metric or recording rule its
// queries read: ops, p99 and errors per node, quorum, breakers, raft, hints, disk and
// reserve, ring changes, repair, clock offset.
var dashboardCovers = []string{
	"instance_op:ringkv_ops:rate1m", "ringkv_op_duration_seconds", "instance_kind:ringkv_op_errors:rate1m",
	"ringkv_ranges_without_quorum", "ringkv_breaker_state", "ringkv_raft_term", "ringkv_hints_queued",
	"ringkv_hints_dropped_total", "ringkv_disk_free_bytes", "ringkv_disk_reserve_bytes",
	"ringkv_ring_change_in_flight", "ringkv_ring_change_moves_pending",
	"ringkv_repair_last_completed_timestamp_seconds", "ringkv_damaged_ranges", "ringkv_clock_offset_seconds",
}

// TestDashboardCovers: the dashboard draws each of dashboardCovers.
func TestDashboardCovers(t *testing.T) {
	read := map[string]bool{}
	for _, e := range dashboardExprs(t) {
		ms, rs := metricNames(e)
		for _, m := range append(ms, rs...) {
			read[m] = true
		}
	}
	for _, m := range dashboardCovers {
		if !read[m] {
			t.Errorf("dashboard.json: no panel reads %s", m)
		}
	}
}

// TestDashboardQueries: every query of the dashboard parses as PromQL. promtool checks them
// as the expressions of a generated rule file: Prometheus' own parser, without importing
// github.com/prometheus/prometheus (a large module) into this one; `promtool query` would
// need a running server.
func TestDashboardQueries(t *testing.T) {
	pt := promtool(t)
	exprs := dashboardExprs(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for _, k := range slices.Sorted(mapsKeys(exprs)) {
		q, _ := json.Marshal(exprs[k]) // a JSON string is a YAML double-quoted scalar
		fmt.Fprintf(&b, "      - record: dashboard:%s\n        expr: %s\n", k, q)
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(pt, "check", "rules", file).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules (the dashboard's queries): %v\n%s", err, out)
	}
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

var (
	quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	ident  = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// metricNames returns the metric names an expression reads: ringkv's, the process
// collector's and Prometheus' `up`; names with a colon are recording rules.
func metricNames(expr string) (metrics, recorded []string) {
	for _, id := range ident.FindAllString(quoted.ReplaceAllString(expr, `""`), -1) {
		switch {
		case strings.Contains(id, ":"):
			recorded = append(recorded, id)
		case id == "up", strings.HasPrefix(id, "ringkv_"), strings.HasPrefix(id, "process_"), strings.HasPrefix(id, "go_"):
			metrics = append(metrics, id)
		}
	}
	return metrics, recorded
}

// boundedLabels are the labels ringkv's metrics may carry (by default, without per-vnode
// metrics): each has a fixed set of values or one per peer.
var boundedLabels = []string{"op", "role", "kind", "peer", "state", "part", "quantile"}

// TestMetricsExist: a real node's /metrics (n1 of a 3-node cluster that took writes while
// n3 was down, so that hints, breakers and clock offsets have series) serves every metric
// the rules and the dashboard read, and every recording rule they read is defined. The
// node's families follow Prometheus' conventions: counters end in _total, no family is in
// milliseconds or other non-base units, and their labels are bounded.
func TestMetricsExist(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a 3-node cluster")
	}
	base := node.DefaultConfig()
	base.Replicas, base.VNodes = 3, 16
	base.ReplicaTimeout, base.DrainTimeout = time.Second, 2*time.Second
	base.MinFreeDisk = store.Reserve{Bytes: 1 << 20}
	c := clustertest.Start(t, 3, base)
	hc := &http.Client{Timeout: 5 * time.Second}
	put := func(key string, ack int) error {
		url := fmt.Sprintf("http://%s/v0/entity?id=%s&ack=%d", c.Node(0).Addrs().HTTP, key, ack)
		req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader("v"))
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("PUT %s: got %d, want 201", key, resp.StatusCode)
		}
		return nil
	}
	for i := range 20 {
		if err := put(fmt.Sprintf("k%d", i), 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Stop(2); err != nil {
		t.Fatalf("stop n3: %v", err)
	}
	for i := range 20 {
		if err := put(fmt.Sprintf("h%d", i), 1); err != nil {
			t.Fatal(err)
		}
	}

	admin := "http://" + c.Node(0).Addrs().Admin + "/metrics"
	var names map[string]bool
	var types map[string]string
	var labels map[string]map[string]bool
	want := map[string][]string{} // metric -> where it is read
	recorded := map[string][]string{}
	for _, a := range append(alerts(t), readRules(t, "rules/recording.yml")...) {
		ms, rs := metricNames(a.expr)
		for _, m := range ms {
			want[m] = append(want[m], "rule "+a.alert+a.record)
		}
		for _, r := range rs {
			recorded[r] = append(recorded[r], "rule "+a.alert+a.record)
		}
	}
	for k, e := range dashboardExprs(t) {
		ms, rs := metricNames(e)
		for _, m := range ms {
			want[m] = append(want[m], "dashboard "+k)
		}
		for _, r := range rs {
			recorded[r] = append(recorded[r], "dashboard "+k)
		}
	}
	// Hints and breakers appear once n1 has tried n3: poll until every wanted name is served.
	// Clock offsets are forgotten 30 s after the last replica call: write again each round.
	round := 0
	eventually.Succeeds(t, 30*time.Second, func() error {
		round++
		if err := put(fmt.Sprintf("r%d", round), 1); err != nil {
			return err
		}
		var err error
		names, types, labels, err = scrape(hc, admin)
		if err != nil {
			return err
		}
		var missing []string
		for m, where := range want {
			if m != "up" && !names[m] {
				missing = append(missing, fmt.Sprintf("%s (%s)", m, where[0]))
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return fmt.Errorf("%s: missing %s", admin, strings.Join(missing, ", "))
		}
		return nil
	})

	defined := map[string]bool{}
	for _, r := range readRules(t, "rules/recording.yml") {
		defined[r.record] = true
	}
	for r, where := range recorded {
		if !defined[r] {
			t.Errorf("recording rule %s (read by %s) is not defined in rules/recording.yml", r, where[0])
		}
	}

	for fam, typ := range types {
		if !strings.HasPrefix(fam, "ringkv_") {
			continue
		}
		if (typ == "counter") != strings.HasSuffix(fam, "_total") {
			t.Errorf("%s: a %s; want _total on counters and only on them", fam, typ)
		}
		for _, bad := range []string{"_ms", "_milliseconds", "_microseconds", "_kb", "_mb", "_kib", "_mib", "_percent", "_minutes", "_hours"} {
			if strings.HasSuffix(strings.TrimSuffix(fam, "_total"), bad) {
				t.Errorf("%s: not in base units (seconds, bytes, ratios)", fam)
			}
		}
		for l := range labels[fam] {
			if !slices.Contains(boundedLabels, l) {
				t.Errorf("%s: label %q, want only %v (bounded: per-vnode and per-key data go through the Admin API)", fam, l, boundedLabels)
			}
		}
	}
}

var seriesLabel = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)

// scrape reads a /metrics page in Prometheus' text format: the names of its series, the type
// of each family, and the label names of each family.
func scrape(hc *http.Client, url string) (names map[string]bool, types map[string]string, labels map[string]map[string]bool, err error) {
	resp, err := hc.Get(url)
	if err != nil {
		return nil, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, nil, err
	}
	names, types, labels = map[string]bool{}, map[string]string{}, map[string]map[string]bool{}
	family := ""
	for _, line := range strings.Split(string(body), "\n") {
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			parts := strings.Fields(f)
			if len(parts) == 2 {
				family, types[parts[0]] = parts[0], parts[1]
				labels[family] = map[string]bool{}
			}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		name, lbls, _ := strings.Cut(name, "{")
		if lbls == "" {
			if i := strings.IndexByte(line, '{'); i >= 0 {
				name, rest = line[:i], line[i:]
			}
		} else {
			rest = lbls
		}
		names[name] = true
		if family != "" && strings.HasPrefix(name, family) {
			for _, m := range seriesLabel.FindAllStringSubmatch(rest, -1) {
				labels[family][m[1]] = true
			}
		}
	}
	return names, types, labels, nil
}
