package fake

import (
	"fmt"
	"math"
	"net/netip"

	"github.com/ccmkit/ccmkit/internal/netaddr"
)

// errPoolExhausted is wrapped by the error of an operation that needs an
// address from a pool that has none left.
var errPoolExhausted = kindOf(ErrConflict, "fake: address pool exhausted")

// pool allocates addresses of one network. The network address (and, for
// IPv4, the broadcast address) is never allocated. Allocation is
// deterministic: the next free address after the last one allocated,
// wrapping around. It is not safe for concurrent use (the store locks).
type pool struct {
	prefix      netip.Prefix
	first, last netip.Addr // allocatable range, inclusive
	next        netip.Addr
	capacity    uint64
	used        map[netip.Addr]struct{}
}

func newPool(cidr string) (*pool, error) {
	p, err := parsePool(cidr)
	if err != nil {
		return nil, fmt.Errorf("pool %q: %w", cidr, err)
	}
	last := netaddr.Last(p)
	if p.Addr().Is4() {
		last = last.Prev() // broadcast
	}
	hostBits := p.Addr().BitLen() - p.Bits()
	capacity := uint64(math.MaxUint64)
	if hostBits < 64 {
		capacity = 1<<hostBits - 1
		if p.Addr().Is4() {
			capacity--
		}
	}
	first := p.Addr().Next()
	return &pool{prefix: p, first: first, last: last, next: first, capacity: capacity, used: map[netip.Addr]struct{}{}}, nil
}

func (p *pool) contains(a netip.Addr) bool {
	return p.prefix.Contains(a) && a.Compare(p.first) >= 0 && a.Compare(p.last) <= 0
}

// allocate returns the next free address.
func (p *pool) allocate() (netip.Addr, error) {
	if uint64(len(p.used)) >= p.capacity {
		return netip.Addr{}, fmt.Errorf("%w: %s has no free address", errPoolExhausted, p.prefix)
	}
	a := p.next
	for {
		if _, taken := p.used[a]; !taken {
			break
		}
		a = p.after(a)
	}
	p.used[a] = struct{}{}
	p.next = p.after(a)
	return a, nil
}

func (p *pool) after(a netip.Addr) netip.Addr {
	if a == p.last {
		return p.first
	}
	return a.Next()
}

// take marks a, which must be in the pool, as allocated; it fails when a
// is already allocated.
func (p *pool) take(a netip.Addr) error {
	if _, taken := p.used[a]; taken {
		return fmt.Errorf("address %s of pool %s is already allocated", a, p.prefix)
	}
	p.used[a] = struct{}{}
	return nil
}

func (p *pool) release(a netip.Addr) { delete(p.used, a) }

func (p *pool) usage(purpose string) AddressPool {
	return AddressPool{Purpose: purpose, CIDR: p.prefix.String(), Allocated: len(p.used)}
}
