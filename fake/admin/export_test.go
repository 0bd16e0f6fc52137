package admin

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp/cmpopts"
)

// InitializeAdmin initializes c as the CCM does, until the test ends, and
// returns the address its admin endpoint (Options.Address) listens on.
func InitializeAdmin(t testing.TB, c *Cloud) string {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); c.Shutdown() })
	c.Initialize(nil, stop)
	addr, err := c.addr()
	if err != nil || addr == "" {
		t.Fatalf("AdminAddr() = %q, %v; want a listening address", addr, err)
	}
	return addr
}

// AdminAddr returns the address c's admin endpoint listens on.
func AdminAddr(c *Cloud) (string, error) { return c.addr() }

// CmpModel lets go-cmp compare what holds the loadbalancer model (State,
// LoadBalancer): its addresses and CIDRs are net/netip values.
var CmpModel = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})
