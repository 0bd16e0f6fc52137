package admission_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// hugeValue is about the largest value one annotation can have: the
// apiserver refuses annotations of more than 256 KiB in all.
const hugeValue = 200 << 10

// TestCost: the largest Services the apiserver takes stay within the CEL
// cost the apiserver allows a policy (per expression and per binding):
// never an evaluation error, always the Reconciler's verdict.
func TestCost(t *testing.T) {
	set, byName := perPortDeclarations(t)
	ps := newPolicies(set)
	pad := strings.Repeat(" ", hugeValue)
	// list is the size of the longest lists: under the race detector,
	// a tenth (its per-entry cost is what TestCost shows without it).
	list := hugeValue
	if raceEnabled {
		list /= 10
	}
	for _, tc := range []struct {
		name, reason, key, value string
	}{
		{name: "bool padded", reason: "white space is trimmed, however much", key: "bool", value: pad + "true"},
		{name: "bool", reason: "malformed", key: "bool", value: strings.Repeat("y", hugeValue)},
		{name: "int zero-padded", reason: "leading zeros are not significant", key: "int", value: strings.Repeat("0", hugeValue) + "5"},
		{name: "int", reason: "too large", key: "int unbounded", value: strings.Repeat("1", hugeValue)},
		{name: "duration of many components", reason: "the most the policy sums", key: "duration", value: strings.Repeat("1s", 64) + pad},
		{name: "duration of many components, malformed", reason: "the last is not one", key: "duration", value: strings.Repeat("1s", hugeValue/2) + "1x"},
		{name: "duration zero-padded", reason: "leading zeros", key: "duration", value: strings.Repeat("0", hugeValue) + "1s"},
		{name: "duration fraction", reason: "a long fraction", key: "duration", value: "1." + strings.Repeat("9", hugeValue) + "s"},
		{name: "enum padded", reason: "trimmed", key: "enum", value: pad + "round-robin" + pad},
		{name: "IP padded", reason: "trimmed", key: "IP", value: pad + "10.0.0.1"},
		{name: "IP", reason: "too long to be one", key: "IP", value: strings.Repeat("1", hugeValue)},
		{name: "CIDR list", reason: "many short entries", key: "CIDR list", value: strings.TrimSuffix(strings.Repeat("1.0.0.0/8,", list/10), ",")},
		{name: "CIDR list, malformed", reason: "an empty entry at the end", key: "CIDR list", value: strings.Repeat("1.0.0.0/8,", list/10)},
		{name: "string", reason: "any", key: "string", value: strings.Repeat("é", hugeValue/2)},
		{name: "string blank", reason: "only space", key: "string", value: pad},
		{name: "per port padded", reason: "entries, ports and values trimmed", key: "bool per port", value: pad + "80" + pad + "=" + pad + "true" + pad},
		{name: "per port VALUE", reason: "a huge malformed value", key: "bool per port", value: "80=" + strings.Repeat("y", hugeValue)},
		{name: "per port PORT", reason: "a huge malformed port", key: "bool per port", value: strings.Repeat("a", hugeValue) + "=true"},
		{name: "per port entry", reason: "a huge entry without =", key: "bool per port", value: "80=true," + strings.Repeat("y", hugeValue)},
		{name: "per port duration", reason: "the most components the policy sums", key: "duration per port", value: "80=" + strings.Repeat("1s", 64) + pad},
		{name: "per port duration, malformed", reason: "the last component is not one", key: "duration per port", value: "80=" + strings.Repeat("1s", hugeValue/2) + "1x"},
		{name: "per port, many entries", reason: "the first is malformed", key: "int per port", value: "x," + strings.Repeat("80=1,", list/5)},
		{name: "per port, many empty entries", reason: "the first 64 are looked at", key: "IP per port", value: strings.Repeat(",", hugeValue)},
		{name: "per port, 64 long names", reason: "the most entries compared, not ports of the Service", key: "string per port",
			value: strings.Join(manyEntries(64, strings.Repeat("é", 100)), ",") + strings.Repeat("a", 60) + "=x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ps.of(t, allCaps)
			svc := lbService(annotated(byName[tc.key].Name, tc.value))
			if diff := cmp.Diff(verdict{Denied: reconciler(svc, set, allCaps)}, p.evaluate(t, svc, nil)); diff != "" {
				t.Errorf("%s: (-Reconciler +policy):\n%s", tc.reason, diff)
			}
		})
	}

	t.Run("every annotation at once", func(t *testing.T) {
		p := ps.of(t, allCaps)
		svc := lbService()
		for _, a := range set.All() {
			annotated(a.Name, strings.Repeat("1s", 18<<10)+"!")(svc)
		}
		got := p.evaluate(t, svc, p2(svc))
		if diff := cmp.Diff(verdict{}, got); diff != "" {
			t.Errorf("unchanged on UPDATE (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(verdict{Denied: reconciler(svc, set, allCaps)}, p.evaluate(t, svc, nil)); diff != "" {
			t.Errorf("on CREATE (-Reconciler +policy):\n%s", diff)
		}
	})

	t.Run("many ports", func(t *testing.T) {
		caps := loadbalancer.Capabilities{MixedProtocols: true}
		p := ps.of(t, caps)
		var ps []v1.ServicePort
		for i := range 1000 {
			ps = append(ps, v1.ServicePort{Name: fmt.Sprintf("p%d", i), Protocol: v1.ProtocolUDP, Port: int32(1000 + i), NodePort: int32(30000 + i)})
		}
		svc := lbService(ports(ps...))
		if diff := cmp.Diff(verdict{}, p.evaluate(t, svc, p2(svc))); diff != "" {
			t.Errorf("unchanged on UPDATE (-want +got):\n%s", diff)
		}
		want := reconciler(svc, set, caps)[:1]
		if diff := cmp.Diff(verdict{Denied: want}, p.evaluate(t, svc, nil)); diff != "" {
			t.Errorf("on CREATE (-want +got):\n%s", diff)
		}
	})

	// A PerPort value compares its entries with each other and with
	// spec.ports, 64 at the most (the policy's bound): of names of 63
	// characters, with 1000 ports, the message lists them cut at 4 KiB,
	// by the Reconciler and the policy alike.
	t.Run("many ports, per port", func(t *testing.T) {
		p := ps.of(t, allCaps)
		n := 1000
		if raceEnabled {
			n /= 10
		}
		long := func(i int) string { return fmt.Sprintf("%061d%02d", 0, i)[1:] + "x" } // 63 characters
		pp := make([]v1.ServicePort, n)
		for i := range pp {
			pp[i] = port(fmt.Sprintf("%s%d", strings.Repeat("p", 50), i), v1.ProtocolTCP, int32(1000+i))
		}
		var known, unknown []string
		for i := range 64 {
			known = append(known, pp[n-1-i].Name+"=true")
			unknown = append(unknown, long(i)+"=true")
		}
		for _, tc := range []struct{ name, value string }{
			{name: "the last 64 by name", value: strings.Join(known, ",")},
			{name: "63 of them and one that is none", value: strings.Join(known[:63], ",") + ",x=true"},
			{name: "64 that are none", value: strings.Join(unknown, ",")},
			{name: "64, the last twice", value: strings.Join(known[:63], ",") + "," + known[62]},
		} {
			t.Run(tc.name, func(t *testing.T) {
				svc := lbService(ports(pp...), annotated(byName["bool per port"].Name, tc.value))
				if diff := cmp.Diff(verdict{Denied: reconciler(svc, set, allCaps)}, p.evaluate(t, svc, nil)); diff != "" {
					t.Errorf("(-Reconciler +policy):\n%s", diff)
				}
			})
		}
	})

	t.Run("64 source ranges", func(t *testing.T) {
		p := ps.of(t, loadbalancer.Capabilities{})
		var rs []string
		for i := range 64 {
			rs = append(rs, fmt.Sprintf("2001:db8:%x::/48", 64-i), fmt.Sprintf("10.%d.0.0/16", 64-i))
		}
		svc := lbService(sourceRanges(rs[:64]...))
		if diff := cmp.Diff(verdict{Denied: reconciler(svc, set, loadbalancer.Capabilities{})}, p.evaluate(t, svc, nil)); diff != "" {
			t.Errorf("(-Reconciler +policy):\n%s", diff)
		}
	})
}

// p2 returns a copy of svc, as the old Service of an UPDATE that changes
// nothing the policy reads.
func p2(svc *v1.Service) *v1.Service {
	old := svc.DeepCopy()
	old.ResourceVersion = "1"
	return old
}
