package statefile

import (
	"os"
	"sync"
	"testing"
)

// StateFormat is the format of the state files the fake writes.
const StateFormat = stateFormat

// HoldStateLock takes the flock of path+".lock" through an open file of
// its own, as another process would, and returns the function that
// releases it (also run at cleanup).
func HoldStateLock(t testing.TB, path string) (release func()) {
	t.Helper()
	f, err := os.OpenFile(path+".lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("the lock file: %v", err)
	}
	if err := flock(f); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_ = funlock(f)
			f.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// StateLockIsFree reports whether nobody holds the flock of path+".lock"
// now.
func StateLockIsFree(t testing.TB, path string) bool {
	t.Helper()
	f, err := os.OpenFile(path+".lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ok, err := tryFlock(f)
	if ok {
		_ = funlock(f)
	}
	return ok && err == nil
}
