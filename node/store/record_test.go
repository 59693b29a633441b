package store

import (
	"bytes"
	"errors"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
		want []byte
	}{
		{"value", Record{TS: 0x0102030405060708, Value: []byte("hi")},
			[]byte{1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 'h', 'i'}},
		{"empty value", Record{TS: 7, Value: []byte{}}, []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 7}},
		{"tombstone", Record{TS: 9, Tombstone: true}, []byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 9}},
		{"max ts", Record{TS: ^uint64(0), Value: []byte{0}},
			[]byte{1, 0, 255, 255, 255, 255, 255, 255, 255, 255, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.rec.MarshalBinary()
			if err != nil {
				t.Fatalf("MarshalBinary: %v", err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("MarshalBinary: got %v, want %v", got, tt.want)
			}
			var back Record
			if err := back.UnmarshalBinary(got); err != nil {
				t.Fatalf("UnmarshalBinary: %v", err)
			}
			if back.TS != tt.rec.TS || back.Tombstone != tt.rec.Tombstone || !bytes.Equal(back.Value, tt.rec.Value) {
				t.Fatalf("round trip: got %+v, want %+v", back, tt.rec)
			}
			if !tt.rec.Tombstone && back.Value == nil {
				t.Fatalf("round trip: got nil value for a value record, want non-nil")
			}
		})
	}
}

func TestUnmarshalCopies(t *testing.T) {
	data := []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'a'}
	var r Record
	if err := r.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	data[10] = 'b'
	if got := string(r.Value); got != "a" {
		t.Fatalf("value after changing input: got %q, want %q", got, "a")
	}
}

func TestRecordDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"nil", nil, ErrShortRecord},
		{"version only", []byte{1}, ErrShortRecord},
		{"header minus one", []byte{1, 0, 0, 0, 0, 0, 0, 0, 0}, ErrShortRecord},
		{"version 0", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ErrUnknownVersion},
		{"version 2", []byte{2, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ErrUnknownVersion},
		{"short unknown version", []byte{9}, ErrUnknownVersion},
		{"unknown flag", []byte{1, 2, 0, 0, 0, 0, 0, 0, 0, 0}, ErrInvalidRecord},
		{"tombstone with value", []byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 'x'}, ErrInvalidRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Record
			err := r.UnmarshalBinary(tt.data)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestMarshalTombstoneWithValue(t *testing.T) {
	_, err := Record{TS: 1, Tombstone: true, Value: []byte("x")}.MarshalBinary()
	if !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("got %v, want %v", err, ErrInvalidRecord)
	}
}

func TestRecordNewer(t *testing.T) {
	val := func(ts uint64, v string) Record { return Record{TS: ts, Value: []byte(v)} }
	tomb := func(ts uint64) Record { return Record{TS: ts, Tombstone: true} }
	tests := []struct {
		name string
		r, o Record
		want bool
	}{
		{"higher ts wins", val(2, "a"), val(1, "z"), true},
		{"lower ts loses", val(1, "z"), val(2, "a"), false},
		{"higher ts value beats tombstone", val(2, ""), tomb(1), true},
		{"lower ts tombstone loses", tomb(1), val(2, ""), false},
		{"equal ts tombstone beats value", tomb(5), val(5, "zzz"), true},
		{"equal ts value loses to tombstone", val(5, "zzz"), tomb(5), false},
		{"equal ts greater bytes wins", val(5, "b"), val(5, "a"), true},
		{"equal ts smaller bytes loses", val(5, "a"), val(5, "b"), false},
		{"equal ts longer wins over prefix", val(5, "ab"), val(5, "a"), true},
		{"equal ts value beats empty", val(5, "a"), val(5, ""), true},
		{"identical value not newer", val(5, "a"), val(5, "a"), false},
		{"identical tombstone not newer", tomb(5), tomb(5), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.Newer(tt.o); got != tt.want {
				t.Fatalf("%+v.Newer(%+v): got %v, want %v", tt.r, tt.o, got, tt.want)
			}
		})
	}
}

func FuzzRecordCodec(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 'v'})
	f.Add([]byte{1, 1, 0, 0, 0, 0, 0, 0, 0, 2})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Record
		if err := r.UnmarshalBinary(data); err != nil {
			return
		}
		got, err := r.MarshalBinary()
		if err != nil {
			t.Fatalf("re-encode %+v: %v", r, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("re-encode: got %x, want %x", got, data)
		}
		var back Record
		if err := back.UnmarshalBinary(got); err != nil {
			t.Fatalf("decode re-encoded: %v", err)
		}
		if back.TS != r.TS || back.Tombstone != r.Tombstone || !bytes.Equal(back.Value, r.Value) {
			t.Fatalf("round trip: got %+v, want %+v", back, r)
		}
	})
}
