package fake

import (
	"net/netip"
	"os"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ccmkit/ccmkit/routes"
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

// LBRetryAfter is the default of loadbalancer.Options.RetryAfter, the
// longest a provisioning load balancer makes the service controller wait.
const LBRetryAfter = lbRetryAfter

// Unexported API the tests of package fake_test check.
var (
	ErrInstanceNotFound   = errInstanceNotFound
	ErrInstanceExists     = errInstanceExists
	ErrInstanceTerminated = errInstanceTerminated
	ErrInvalidInstance    = errInvalidInstance
	ErrInvalidBackend     = errInvalidBackend
	ErrPoolExhausted      = errPoolExhausted
	ErrThrottled          = errThrottled

	AllLoadBalancerCapabilities = allLoadBalancerCapabilities
	Ops                         = ops
)

// The defaults the field docs state.
const (
	StateFormat                = stateFormat
	DefaultInstanceCIDR        = defaultInstanceCIDR
	DefaultIPv4Pool            = defaultIPv4Pool
	DefaultIPv6Pool            = defaultIPv6Pool
	DefaultZone                = defaultZone
	DefaultRegion              = defaultRegion
	DefaultInstanceType        = defaultInstanceType
	RealisticProvisioningDelay = realisticProvisioningDelay
	RealisticReadsPerSecond    = realisticReadsPerSecond
	RealisticWritesPerSecond   = realisticWritesPerSecond
	RealisticBurst             = realisticBurst
	RealisticBackends          = realisticBackends
)

// Failing returns the interceptor Funcs that fail each call take decides
// to fail (late: after a write took effect).
func Failing(take func(op Op) (err error, late bool)) Funcs { return failing(take) }

// RouteStats returns the route table's batching counters.
func RouteStats(c *Cloud) routes.Stats { return c.routes.Stats() }

// CmpModel lets go-cmp compare what holds the loadbalancer model
// (State, LoadBalancer): its addresses and CIDRs are net/netip values.
var CmpModel = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})
