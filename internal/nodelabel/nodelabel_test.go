package nodelabel

import (
	"strings"
	"testing"
)

func TestKeyProblem(t *testing.T) {
	for _, tc := range []struct {
		name, key, want, reason string
	}{
		{name: "own domain", key: "acme.example.com/rack", reason: "a provider's own label is kept"},
		{name: "plain name", key: "rack", reason: "an unprefixed name is a qualified name"},
		{name: "kubernetes.io", key: "kubernetes.io/arch", want: "outside the kubernetes.io", reason: "the node controller discards it"},
		{name: "subdomain of k8s.io", key: "node.k8s.io/x", want: "outside the kubernetes.io", reason: "subdomains are discarded too"},
		{name: "lookalike domain", key: "notkubernetes.io/x", reason: "the upstream expression anchors at a dot"},
		{name: "not qualified", key: "a b", want: "expected a qualified name", reason: "space is not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := KeyProblem(tc.key)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("KeyProblem(%q) = %q, want containing %q: %s", tc.key, got, tc.want, tc.reason)
			}
		})
	}
}

func TestValueProblem(t *testing.T) {
	for _, tc := range []struct {
		name, value, want, reason string
	}{
		{name: "empty", value: "", reason: "an empty label value is valid"},
		{name: "zone", value: "eu-1a", reason: "an ordinary value"},
		{name: "slash", value: "a/b", want: "expected a valid label value", reason: "slash is not allowed in a value"},
		{name: "too long", value: strings.Repeat("a", 64), want: "expected a valid label value", reason: "values are at most 63 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ValueProblem(tc.value)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("ValueProblem(%q) = %q, want containing %q: %s", tc.value, got, tc.want, tc.reason)
			}
		})
	}
}
