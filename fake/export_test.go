package fake

import (
	"net/netip"

	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ccmkit/ccmkit/routes"
)

// This file gives the tests of package fake_test the helpers they share
// with the package's internal tests, so that each is written once.

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
