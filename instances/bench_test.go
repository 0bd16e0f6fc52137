package instances_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/instances"
)

func BenchmarkBuildAddresses(b *testing.B) {
	many := make([]v1.NodeAddress, 0, 32)
	for i := range 8 {
		many = append(many,
			internal(fmt.Sprintf("10.0.%d.%d", i, 255-i)), internal(fmt.Sprintf("fd00::%x", 1000-i)),
			external(fmt.Sprintf("198.51.100.%d", 200-i)), external(fmt.Sprintf("2001:db8::%x", 99-i)))
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(many), func(i, j int) { many[i], many[j] = many[j], many[i] })
	dual := []v1.NodeAddress{
		hostname("node-1"), external("2001:db8::7"), internal("fd00::1"), external("203.0.113.7"),
		internal("10.0.0.1"), addr(v1.NodeInternalDNS, "node-1.internal"),
	}
	cases := []struct {
		name string
		in   []v1.NodeAddress
		opts instances.AddressPolicy
	}{
		{"dual-stack-6", dual, instances.AddressPolicy{}},
		{"dual-stack-6-provided-ip", dual, instances.AddressPolicy{ProvidedNodeIP: "10.0.0.1,fd00::1"}},
		{"shuffled-32", many, instances.AddressPolicy{}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := instances.BuildAddresses(c.in, c.opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInstanceMetadata5000 measures one sync of the node controller
// over 5,000 initialized Nodes (all with a provider ID) against an
// in-memory driver, directly and through a Cache whose TTL expires once per
// sync. cloud-calls/op is what matters against a real, rate-limited cloud.
func BenchmarkInstanceMetadata5000(b *testing.B) {
	const n = 5000
	nodes := make([]*v1.Node, n)
	for i := range nodes {
		nodes[i] = nodeWithProviderID(fmt.Sprintf("node-%05d", i), fmt.Sprintf("acme://i-%05d", i))
	}
	run := func(b *testing.B, cloud *memCloud, a *instances.Adapter, clock *fakeClock) {
		b.ReportAllocs()
		for b.Loop() {
			for _, node := range nodes {
				if _, err := a.InstanceMetadata(b.Context(), node); err != nil {
					b.Fatal(err)
				}
			}
			if clock != nil {
				clock.Advance(time.Minute) // the next sync finds an expired list
			}
		}
		c := cloud.calls()
		b.ReportMetric(float64(c.List+c.GetByID+c.GetByName)/float64(b.N), "cloud-calls/op")
	}
	b.Run("direct", func(b *testing.B) {
		cloud := numberedCloud(n)
		a, err := instances.NewAdapter(cloud, acme, instances.Options{})
		if err != nil {
			b.Fatal(err)
		}
		run(b, cloud, a, nil)
	})
	b.Run("cache", func(b *testing.B) {
		cloud := numberedCloud(n)
		f := newCacheFixture(b, nil, cloud, instances.CacheOptions{TTL: time.Minute})
		run(b, cloud, f.adapter, f.clock)
	})
}
