package admission_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/ccmkit/ccmkit/loadbalancer"
)

// perPortValues are good and bad VALUEs of each PerPort kind of
// declarations, for perPortCorpus.
var perPortValues = map[string]struct{ good, bad []string }{
	"bool per port":     {good: []string{"true", " false "}, bad: []string{"yes", "True", ""}},
	"int per port":      {good: []string{"42", "+0005", "100000"}, bad: []string{"0", "1e3", "99999999999999999999", "4 2"}},
	"duration per port": {good: []string{"30s", "1m30s", "0"}, bad: []string{"-1s", "1x", "2562048h", "1h 1m"}},
	"enum per port":     {good: []string{"round-robin", "least-connections"}, bad: []string{"Round-Robin", "random"}},
	"IP per port":       {good: []string{"10.0.0.1", "::ffff:1.2.3.4", "2001:DB8::1"}, bad: []string{"fe80::1%eth0", "1.2.3", "010.0.0.1"}},
	"string per port":   {good: []string{"x", "a b", "a=b"}, bad: []string{"", " ", "a\x00b", "\x1b[2J", "a\u200bb", "a\u202eb", "\ufeffa", "a\u0085b"}},
}

// perPortCorpus returns PerPort values built of good VALUEs g, h and a bad
// one b: ports by number and by name, known to lbService's ports or not,
// white space, and every problem annotation's parsePorts reports.
func perPortCorpus(g, h, b string) []string {
	long := strings.Repeat("a", 63)
	return []string{
		"80=" + g, "http=" + g, " 80 = " + g + " ,\thttps=" + h, "443=" + h + ",80=" + g, "80=" + g + ",http=" + h,
		"8080=" + g, "0080=" + g, "70000=" + g, "x=" + g + ",y=" + h, "9999=" + g + ",x=" + g + ",8080=" + h, long + "=" + g,
		"\u00a080=" + g, "80\u200b=" + g, "HTTP=" + g, "+80=" + g, "-80=" + g, "=" + g, long + "a=" + g,
		"80", g, "", " ", ",", "80=" + g + ",", "80=" + g + ",,https=" + h,
		"80=" + g + ",80=" + h, "80=" + g + ",https=" + h + ",https=" + g + ",80=" + g, "80=" + g + ",80=" + h + ",x=" + b,
		"80=" + b, "http=" + g + ",443=" + b, "80=" + b + ",,x",
	}
}

// withPorts is lbService's modifier for the ports http/80, https/443.
var withPorts = ports(port("http", v1.ProtocolTCP, 80), port("https", v1.ProtocolTCP, 443))

// TestPerPortAgree: for every PerPort kind and every value of the corpus,
// on a Service with two named ports or one unnamed, the policy refuses the
// Service exactly when the Reconciler does, with its message (annotation's
// for the syntax and values, unknownPorts' for a PORT that is no port of
// the Service), and never fails to evaluate.
func TestPerPortAgree(t *testing.T) {
	set, byName := perPortDeclarations(t)
	p := newPolicies(set).of(t, allCaps)
	unnamed := ports(v1.ServicePort{Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080})
	for key, vs := range perPortValues {
		t.Run(key, func(t *testing.T) {
			a := byName[key]
			var values []string
			for _, b := range vs.bad {
				values = append(values, perPortCorpus(vs.good[0], vs.good[len(vs.good)-1], b)...)
				values = append(values, "80="+b)
			}
			for _, g := range vs.good {
				values = append(values, "80="+g+",443="+g)
			}
			for _, v := range values {
				for _, mod := range []func(*v1.Service){withPorts, unnamed} {
					svc := lbService(mod, annotated(a.Name, v))
					want := reconciler(svc, set, allCaps)
					if len(want) > 0 && strings.Contains(want[0], " names too: ") {
						want = want[1:] // a known difference: one port named by number and by name (TestKnownDifferences)
						if len(want) == 0 {
							want = nil
						}
					}
					if diff := cmp.Diff(verdict{Denied: want}, p.evaluate(t, svc, nil)); diff != "" {
						t.Errorf("%s %q on ports %v: the policy and the Reconciler disagree (-Reconciler +policy):\n%s", a.Name, v, svc.Spec.Ports, diff)
					}
				}
			}
		})
	}
	t.Run("quoting", func(t *testing.T) {
		a := byName["bool per port"]
		for _, q := range quotedCorpus {
			for _, v := range []string{q, "80=" + q, q + "=true", "80=true," + q, "80=true,\"" + q + "\"=x"} {
				svc := lbService(withPorts, annotated(a.Name, v))
				if diff := cmp.Diff(verdict{Denied: reconciler(svc, set, allCaps)}, p.evaluate(t, svc, nil)); diff != "" {
					t.Errorf("%q: (-Reconciler +policy):\n%s", v, diff)
				}
			}
		}
	})
}

// TestPerPortMessages pins the message of each problem of a PerPort
// value, word for word: annotation.Error's for the syntax and values, and
// the unknown port's, which names the first such PORT in canonical order
// and lists the Service's ports.
func TestPerPortMessages(t *testing.T) {
	set, _ := perPortDeclarations(t)
	p := newPolicies(set).of(t, loadbalancer.Capabilities{})
	const name = "lb.example.com/proxy-protocol-ports"
	invalid := func(value, detail string) string {
		return `annotation "lb.example.com/proxy-protocol-ports": invalid value ` + value + `: expected comma-separated PORT=VALUE entries such as "443=true,https=false", each PORT a port number or name (a DNS-1123 label) listed once, and each VALUE "true" or "false"` + detail
	}
	unknown := func(port, list string) string {
		return `annotation "lb.example.com/proxy-protocol-ports": port "` + port + `" is not a port of the service: expected a port name or number of spec.ports (` + list + `)`
	}
	for _, tc := range []struct {
		name, reason, value string
		mods                []func(*v1.Service)
		want                []string
	}{
		{name: "good", reason: "ports by number and name", value: "80=true, https=false", mods: []func(*v1.Service){withPorts}},
		{name: "blank", reason: "no entry", value: " ", want: []string{invalid(`" "`, "")}},
		{name: "empty entry", reason: ",,", value: "80=true,,https=true", want: []string{invalid(`"80=true,,https=true"`, ": entry 2 is empty")}},
		{name: "no =", reason: "a plain value", value: "true", want: []string{invalid(`"true"`, `: entry 1 "true" has no "="`)}},
		{name: "bad PORT", reason: "not a DNS-1123 label", value: "HTTP=true", want: []string{invalid(`"HTTP=true"`, `: entry 1 has PORT "HTTP"`)}},
		{name: "bad VALUE", reason: "the entry and what the kind expects", value: "80=true,http=maybe", want: []string{invalid(`"80=true,http=maybe"`, `: entry 2 has VALUE "maybe"`)}},
		{name: "PORT twice", reason: "its first and last entries", value: "80=true,80=false", want: []string{invalid(`"80=true,80=false"`, `: entries 1 and 2 have PORT "80"`)}},
		{name: "unknown port", reason: "the Service's ports listed", value: "https=true,8443=true,admin=false", mods: []func(*v1.Service){withPorts},
			want: []string{unknown("8443", "http/80, https/443")}},
		{name: "unknown name", reason: "no number: the first name in byte order", value: "zz=true,80=true,admin=false", mods: []func(*v1.Service){withPorts},
			want: []string{unknown("admin", "http/80, https/443")}},
		{name: "unnamed port", reason: "listed by number only", value: "http=true",
			mods: []func(*v1.Service){ports(v1.ServicePort{Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080})}, want: []string{unknown("http", "80")}},
		{name: "a number is no name", reason: "0080 is a name", value: "0080=true", want: []string{unknown("0080", "http/80")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := lbService(append(tc.mods, annotated(name, tc.value))...)
			if diff := cmp.Diff(verdict{Denied: tc.want}, p.evaluate(t, svc, nil)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, reconciler(svc, set, loadbalancer.Capabilities{})); diff != "" {
				t.Errorf("%s: the Reconciler's messages (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestPerPortUpdate: on UPDATE a PerPort value is checked when it
// changes, and its PORTs also when the Service's ports change.
func TestPerPortUpdate(t *testing.T) {
	set, _ := perPortDeclarations(t)
	p := newPolicies(set).of(t, allCaps)
	const name = "lb.example.com/proxy-protocol-ports"
	unknown := `annotation "lb.example.com/proxy-protocol-ports": port "https" is not a port of the service: expected a port name or number of spec.ports (http/80)`
	httpOnly := ports(port("http", v1.ProtocolTCP, 80))
	for _, tc := range []struct {
		name, reason string
		old, new     []func(*v1.Service)
		want         []string
	}{
		{name: "bad value kept", reason: "the old Service's value", old: []func(*v1.Service){annotated(name, "80=yes")},
			new: []func(*v1.Service){annotated(name, "80=yes"), labelled}},
		{name: "unknown port kept", reason: "the same value and ports", old: []func(*v1.Service){annotated(name, "https=true")},
			new: []func(*v1.Service){annotated(name, "https=true"), labelled}},
		{name: "port removed", reason: "the value names a port the Service no longer has", old: []func(*v1.Service){withPorts, annotated(name, "https=true")},
			new: []func(*v1.Service){httpOnly, annotated(name, "https=true")}, want: []string{unknown}},
		{name: "value changed", reason: "a new value is checked", old: []func(*v1.Service){annotated(name, "http=true")},
			new: []func(*v1.Service){annotated(name, "https=true")}, want: []string{unknown}},
		{name: "port renamed in", reason: "a Service that gains the port is fine", old: []func(*v1.Service){annotated(name, "https=true")},
			new: []func(*v1.Service){withPorts, annotated(name, "https=true")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, svc := lbService(tc.old...), lbService(tc.new...)
			if diff := cmp.Diff(verdict{Denied: tc.want}, p.evaluate(t, svc, old)); diff != "" {
				t.Errorf("%s: UPDATE (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// manyEntries returns n entries "pI=v", I from 1.
func manyEntries(n int, v string) []string {
	es := make([]string, n)
	for i := range es {
		es[i] = fmt.Sprintf("p%d=%s", i+1, v)
	}
	return es
}

// namedPorts is lbService's modifier for n TCP ports named "pI", I from 1.
func namedPorts(n int) func(*v1.Service) {
	ps := make([]v1.ServicePort, n)
	for i := range ps {
		ps[i] = port(fmt.Sprintf("p%d", i+1), v1.ProtocolTCP, int32(1000+i))
	}
	return ports(ps...)
}
