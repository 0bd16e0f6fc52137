package fake

import (
	"time"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// This file gives the tests of package fake_test what they need of a
// hierarchical cloud (LoadBalancerSection.Hierarchical) that the exported
// API does not offer.

// HierarchicalBusyAfterWrite is the default of
// LoadBalancerSection.BusyAfterWrite on a hierarchical cloud.
const HierarchicalBusyAfterWrite = hierarchicalBusyAfterWrite

// LoadBalancerAPI returns c's load-balancer cloud API as its Reconciler's
// cache calls it: counted, rate limited and intercepted, not cached.
func LoadBalancerAPI(c *Cloud) loadbalancer.ListDriver { return cloudAPI{m: c.meter, s: c.store} }

// LoadBalancerCapabilities returns the capabilities c's provider
// declares.
func LoadBalancerCapabilities(c *Cloud) loadbalancer.Capabilities { return c.lbCaps }

// BusyOf reports whether err says the cloud is busy with a load balancer,
// for about how long, and whether the write was refused (nothing changed)
// or applied (a *loadbalancer.BusyError, with or without
// loadbalancer.ErrRefused).
func BusyOf(err error) (after time.Duration, refused, busy bool) {
	b, refused := busyOf(err)
	if b == nil {
		return 0, false, false
	}
	return b.After, refused, true
}
