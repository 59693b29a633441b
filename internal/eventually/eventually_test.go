package eventually

import (
	"errors"
	"testing"
	"time"
)

func TestSucceedsAfterSomeTries(t *testing.T) {
	tries := 0
	Succeeds(t, 5*time.Second, func() error {
		if tries++; tries < 4 {
			return errors.New("not yet")
		}
		return nil
	})
	if tries != 4 {
		t.Errorf("got %d tries, want 4", tries)
	}
}

// failT records Fatalf instead of stopping the test.
type failT struct {
	testing.TB
	msg string
}

func (f *failT) Helper() {}
func (f *failT) Fatalf(format string, args ...any) {
	f.msg = format
	panic(f)
}

func TestSucceedsFailsPastDeadline(t *testing.T) {
	ft := &failT{TB: t}
	func() {
		defer func() {
			if r := recover(); r != ft {
				t.Fatalf("got panic %v, want the recorded Fatalf", r)
			}
		}()
		Succeeds(ft, 30*time.Millisecond, func() error { return errors.New("never") })
	}()
	if ft.msg == "" {
		t.Errorf("got no failure past the deadline, want one")
	}
}
