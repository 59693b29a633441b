package cli

import (
	"bytes"
	"encoding/json"
	"testing"

	"ringkv/proto/kvpb"
)

// TestPrintJSONNumbers: a protobuf message prints with proto field names, every field present,
// 64-bit integers as JSON numbers (protojson writes strings), enums by name.
func TestPrintJSONNumbers(t *testing.T) {
	var buf bytes.Buffer
	m := &kvpb.NodeStats{Id: "n1", UnixNanos: 1767366245000000000, Epoch: 9, Errors: map[string]uint64{"timeout": 3}, OpsPerSec: 1.5}
	if err := PrintJSON(&buf, m); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	d := json.NewDecoder(&buf)
	d.UseNumber()
	if err := d.Decode(&got); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{"unix_nanos": "1767366245000000000", "epoch": "9", "keys": "0", "ops_per_sec": "1.5"} {
		if n, ok := got[field].(json.Number); !ok || n.String() != want {
			t.Errorf("got %s = %#v, want the number %s", field, got[field], want)
		}
	}
	if n, ok := got["errors"].(map[string]any)["timeout"].(json.Number); !ok || n.String() != "3" {
		t.Errorf("got errors %#v, want timeout 3 as a number", got["errors"])
	}
	if _, ok := got["vnodes"].([]any); !ok {
		t.Errorf("got vnodes %#v, want an empty list (every field present)", got["vnodes"])
	}

	buf.Reset()
	if err := PrintJSON(&buf, &kvpb.ChangeRequest{Kind: kvpb.ChangeRequest_REMOVE, NodeId: "n2"}); err != nil {
		t.Fatal(err)
	}
	var req map[string]any
	if err := json.Unmarshal(buf.Bytes(), &req); err != nil {
		t.Fatal(err)
	}
	if req["kind"] != "REMOVE" || req["node_id"] != "n2" {
		t.Errorf("got %v, want kind REMOVE and node_id n2", req)
	}
}
