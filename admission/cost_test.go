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
	set, byName := declarations(t)
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
