package fake

import (
	"os"
	"sync"
	"testing"
)

// This file gives the tests of package fake_test the helpers they share
// with the package's internal tests, so that each is written once.

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

// InitializeAdmin initializes c as the CCM does, until the test ends, and
// returns the address its admin endpoint (Config.Admin.Address) listens on.
func InitializeAdmin(t testing.TB, c *Cloud) string {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); c.Shutdown() })
	c.Initialize(nil, stop)
	addr, err := c.AdminAddr()
	if err != nil || addr == "" {
		t.Fatalf("AdminAddr() = %q, %v; want a listening address", addr, err)
	}
	return addr
}

// LBRetryAfter is the default of loadbalancer.Options.RetryAfter, the
// longest a provisioning load balancer makes the service controller wait.
const LBRetryAfter = lbRetryAfter
