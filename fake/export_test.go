package fake

import (
	"context"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

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

// InitializeAdmin initializes c as the CCM does, until the test ends, and
// returns the address its admin endpoint (Config.Admin.Address) listens on.
func InitializeAdmin(t testing.TB, c *Cloud) string {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); c.Shutdown() })
	c.Initialize(nil, stop)
	addr, err := c.adminAddr()
	if err != nil || addr == "" {
		t.Fatalf("AdminAddr() = %q, %v; want a listening address", addr, err)
	}
	return addr
}

// LBRetryAfter is the default of loadbalancer.Options.RetryAfter, the
// longest a provisioning load balancer makes the service controller wait.
const LBRetryAfter = lbRetryAfter

// Unexported API the tests of package fake_test check.
var (
	ErrInjected           = errInjected
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
	StateFormatV1              = stateFormatV1
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

// Fault is a fault of the admin endpoint's script (POST /faults), with a
// Go error of the test's own.
type Fault = fault

// InjectFault adds f to c's fault script, as POST /faults does.
func InjectFault(c *Cloud, f Fault) error { return c.meter.script.add(f) }

// ClearFaults empties c's fault script, as DELETE /faults does.
func ClearFaults(c *Cloud) { c.clearFaults() }

// Failing returns the interceptor Funcs that fail each call take decides
// to fail (late: after a write took effect).
func Failing(take func(op Op) (err error, late bool)) Funcs { return failing(take) }

// RouteStats returns the route table's batching counters.
func RouteStats(c *Cloud) routes.Stats { return c.routes.Stats() }

// RemoveInstance is DELETE /instances/{id}.
func RemoveInstance(c *Cloud, id string) error {
	return c.store.removeInstance(context.Background(), id)
}

// SetRateLimit is PUT /ratelimit.
func SetRateLimit(c *Cloud, r RateLimit) error { return c.setRateLimit(r) }

// SetProvisioningDelay is PUT /provisioning.
func SetProvisioningDelay(c *Cloud, d time.Duration) error { return c.setProvisioningDelay(d) }

// ResetCalls is POST /calls/reset.
func ResetCalls(c *Cloud) { c.resetCalls() }

// AdminAddr returns the address c's admin endpoint listens on.
func AdminAddr(c *Cloud) (string, error) { return c.adminAddr() }

// RegisterError returns the error of the package's registration.
func RegisterError() error { return registerErr }

// CmpModel lets go-cmp compare what holds the loadbalancer model
// (State, LoadBalancer): its addresses and CIDRs are net/netip values.
var CmpModel = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})
