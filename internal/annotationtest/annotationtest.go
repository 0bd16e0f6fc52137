// Package annotationtest holds the declared annotations that the tests of
// the annotation and loadbalancer packages share, so that both test one
// fixture. It is for tests only.
package annotationtest

import (
	"testing"

	"github.com/ccmkit/ccmkit/annotation"
)

// EveryKind declares one annotation of every kind, three of them provider
// settings (bool, duration and enum, each with a default), and returns the
// set and the declared annotations by kind. It fails t if a declaration
// is refused.
func EveryKind(t testing.TB) (*annotation.Set, map[annotation.Kind]*annotation.Annotation) {
	t.Helper()
	set := &annotation.Set{}
	byKind := map[annotation.Kind]*annotation.Annotation{}
	for _, a := range []annotation.Annotation{
		{Name: "lb.example.com/proxy-protocol", Kind: annotation.KindBool, Default: "false", Doc: "Send the PROXY protocol header to backends.", Setting: true},
		{Name: "lb.example.com/max-connections", Kind: annotation.KindInt, Min: 1, Max: 100000, Doc: "Connection limit per listener."},
		{Name: "lb.example.com/idle-timeout", Kind: annotation.KindDuration, Default: "1m", Doc: "Close idle connections after this long.", Setting: true},
		{Name: "lb.example.com/algorithm", Kind: annotation.KindEnum, Values: []string{"round-robin", "least-connections"}, Default: "round-robin", Doc: "How connections are spread over backends.", Setting: true},
		{Name: "lb.example.com/ip", Kind: annotation.KindIP, Doc: "Request this address for the load balancer."},
		{Name: "lb.example.com/internal-ranges", Kind: annotation.KindCIDRList, Doc: "Private networks the load balancer is reachable from.\n\nSeparate entries with commas."},
		{Name: "lb.example.com/id", Kind: annotation.KindString, Doc: "Cloud ID of an existing load balancer to adopt."},
	} {
		d, err := set.Declare(a)
		if err != nil {
			t.Fatalf("Declare(%q): %v", a.Name, err)
		}
		byKind[a.Kind] = d
	}
	return set, byKind
}
