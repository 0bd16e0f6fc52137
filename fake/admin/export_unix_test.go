//go:build unix

package admin

import (
	"os"
	"sync"
	"syscall"
	"testing"
)

// HoldStateLock takes the flock of path+".lock" through an open file of
// its own, as another process would, and returns the function that
// releases it (also run at cleanup).
func HoldStateLock(t testing.TB, path string) (release func()) {
	t.Helper()
	f, err := os.OpenFile(path+".lock", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("the lock file: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			f.Close()
		})
	}
	t.Cleanup(release)
	return release
}
