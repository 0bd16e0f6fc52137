package ccmkit_test

// The bad-input catalogue's surfaces added by issue 29: the constructors
// of the housekeeping controllers and of the governor, and
// testing/scale's Config. Each case is held to TestBadInput's rule.

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/ccmkit/ccmkit/admission"
	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/governor"
	"github.com/ccmkit/ccmkit/housekeeping"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/testing/scale"
)

// hardeningInputs are the cases of the surfaces issue 29 added.
func hardeningInputs(w *badWorld) []badInput {
	return slices.Concat(housekeepingInputs(w), governorInputs(), scaleInputs(), declarationInputs(), claimedInputs(w), admissionInputs())
}

// refused returns err, the error of a constructor that must refuse its
// input, or an error wrapping errWrongOutcome when it built a *T anyway.
func refused[T any](built *T, err error) error {
	if built != nil {
		return fmt.Errorf("%w: a %T was built: %v", errWrongOutcome, built, err) //nolint:errorlint // err is nil when it was built: %v prints <nil> where %w would print %!w(<nil>)
	}
	return err
}

// hostileClusterNames are --cluster-name values no CCM should run with:
// each would forge or hide part of every load balancer's name and tags.
// They are the hiddenText values, and names with spaces.
var hostileClusterNames = func() map[string]string {
	out := maps.Clone(hiddenText)
	out["space"] = "my cluster"
	out["newline and a key"] = "c\nkind: Secret"
	out["1 MiB, a space"] = strings.Repeat("c", huge) + " "
	return out
}()

// housekeepingInputs: the options and arguments of NewDriftRepair and
// NewOrphanCollector. A refused constructor starts nothing and calls no
// cloud.
func housekeepingInputs(w *badWorld) []badInput {
	client := k8sfake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	services, nodes := factory.Core().V1().Services(), factory.Core().V1().Nodes()
	reconciler := w.lbs.(*loadbalancer.Reconciler)
	// args are the constructors' arguments; a nil field is given as nil.
	type args struct {
		lb       *loadbalancer.Reconciler
		client   kubernetes.Interface
		services coreinformers.ServiceInformer
		nodes    coreinformers.NodeInformer
	}
	all := args{lb: reconciler, client: client, services: services, nodes: nodes}
	var out []badInput
	add := func(name, reason string, call func() error, field, value, expect string) {
		out = append(out, badInput{surface: "housekeeping", name: name, reason: reason,
			call:  func(context.Context) error { return call() },
			field: field, value: value, expect: expect})
	}
	drift := func(name, reason string, a args, opts housekeeping.DriftRepairOptions, field, value, expect string) {
		var lb housekeeping.Repairer
		if a.lb != nil {
			lb = a.lb
		}
		add("drift repair/"+name, reason, func() error {
			return refused(housekeeping.NewDriftRepair(lb, a.client, a.services, a.nodes, opts))
		}, field, value, expect)
	}
	orphans := func(name, reason string, a args, opts housekeeping.OrphanCollectorOptions, field, value, expect string) {
		var lb housekeeping.Owners
		if a.lb != nil {
			lb = a.lb
		}
		add("orphan collection/"+name, reason, func() error {
			return refused(housekeeping.NewOrphanCollector(lb, a.client, a.services, opts))
		}, field, value, expect)
	}
	ok := housekeeping.DriftRepairOptions{ClusterName: badCluster}
	okOrphans := housekeeping.OrphanCollectorOptions{ClusterName: badCluster}
	without := func(mod func(*args)) args { a := all; mod(&a); return a }
	drift("nil Repairer", "no load balancers to repair", without(func(a *args) { a.lb = nil }), ok, "driver", "nil", "expected a non-nil housekeeping.Repairer")
	drift("nil client", "no API server to patch status through", without(func(a *args) { a.client = nil }), ok, "client", "nil", "expected a non-nil client")
	drift("nil Services informer", "no Services to repair", without(func(a *args) { a.services = nil }), ok, "services informer", "nil", "expected")
	drift("nil Nodes informer", "no Nodes to give the load balancers", without(func(a *args) { a.nodes = nil }), ok, "nodes informer", "nil", "expected")
	orphans("nil Owners", "no load balancers to list", without(func(a *args) { a.lb = nil }), okOrphans, "driver", "nil", "expected a non-nil housekeeping.Owners")
	orphans("nil client", "no API server to confirm a UID is gone", without(func(a *args) { a.client = nil }), okOrphans, "client", "nil", "expected a non-nil client")
	orphans("nil Services informer", "no Services to tell orphans by", without(func(a *args) { a.services = nil }), okOrphans, "services informer", "nil", "expected")
	drift("empty cluster name", "every call needs the cluster", all, housekeeping.DriftRepairOptions{}, "Options.ClusterName", "empty", "expected the CCM's --cluster-name")
	orphans("empty cluster name", "the owned load balancers are the cluster's", all, housekeeping.OrphanCollectorOptions{}, "Options.ClusterName", "empty", "expected the CCM's --cluster-name")
	for _, name := range slices.Sorted(maps.Keys(hostileClusterNames)) {
		value := hostileClusterNames[name]
		reason := fmt.Sprintf("a --cluster-name with a %s", name)
		drift("cluster name with a "+name, reason, all, housekeeping.DriftRepairOptions{ClusterName: value}, "Options.ClusterName", q(value), "expected printable characters without spaces")
		orphans("cluster name with a "+name, reason, all, housekeeping.OrphanCollectorOptions{ClusterName: value}, "Options.ClusterName", q(value), "expected printable characters without spaces")
	}
	for _, p := range []time.Duration{-time.Second, math.MinInt64, time.Nanosecond, time.Millisecond, housekeeping.MinPeriod - 1} {
		reason := fmt.Sprintf("a period of %v: none, or a busy loop against the cloud", p)
		drift("period "+p.String(), reason, all, housekeeping.DriftRepairOptions{ClusterName: badCluster, Period: p}, "Options.Period", p.String(), "expected 0 (the default")
		orphans("period "+p.String(), reason, all, housekeeping.OrphanCollectorOptions{ClusterName: badCluster, Period: p}, "Options.Period", p.String(), "expected 0 (the default")
	}
	return out
}

// governorInputs: the budgets of governor.New out of range. A refused
// Governor governs nothing and calls nothing.
func governorInputs() []badInput {
	var out []badInput
	g := func(name, reason string, opts governor.Options, field, value, expect string) {
		out = append(out, badInput{surface: "governor", name: name, reason: reason,
			call:  func(context.Context) error { return refused(governor.New(opts)) },
			field: field, value: value, expect: expect})
	}
	for _, r := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, 1e-9, -math.MaxFloat64} {
		v := strconv.FormatFloat(r, 'g', -1, 64)
		if math.IsInf(r, 0) {
			v = fmt.Sprint(r) // fmt's spelling: +Inf, -Inf
		}
		g("read rate "+v, "a rate no bucket can refill at", governor.Options{Reads: governor.Limit{Rate: r}}, "Options.Reads.Rate", v, "expected 0 (the default")
		g("write rate "+v, "a rate no bucket can refill at", governor.Options{Writes: governor.Limit{Rate: r}}, "Options.Writes.Rate", v, "expected 0 (the default")
	}
	for _, b := range []int{-1, 1_000_001, math.MaxInt, math.MinInt} {
		v := strconv.Itoa(b)
		g("read burst "+v, "a bucket of no size, or one whose arithmetic overflows", governor.Options{Reads: governor.Limit{Burst: b}}, "Options.Reads.Burst", v, "expected 0 (the default")
	}
	g("normal reserve at the burst", "a normal call could never take a token", governor.Options{Reads: governor.Limit{Burst: 8, NormalReserve: 8}}, "Options.Reads.NormalReserve", "8", "expected below Burst")
	g("background reserve over the burst", "a background call could never take a token", governor.Options{Writes: governor.Limit{Burst: 8, BackgroundReserve: 9}}, "Options.Writes.BackgroundReserve", "9", "expected below Burst")
	g("background reserve below the normal one", "a background call would go before a normal one", governor.Options{Writes: governor.Limit{Burst: 20, NormalReserve: 10, BackgroundReserve: 5}}, "Options.Writes.BackgroundReserve", "5", "expected at least NormalReserve")
	g("default background reserve below the normal one", "Burst/2 is below the NormalReserve given", governor.Options{Reads: governor.Limit{Burst: 20, NormalReserve: 15}}, "Options.Reads.BackgroundReserve", "10", "expected at least NormalReserve")
	return out
}

// scaleInputs: simulations testing/scale cannot run, refused by
// Config.Validate before anything starts.
func scaleInputs() []badInput {
	var out []badInput
	s := func(name, reason string, cfg scale.Config, field, value, expect string) {
		out = append(out, badInput{surface: "scale", name: name, reason: reason,
			call:  func(context.Context) error { return cfg.Validate() },
			field: field, value: value, expect: expect})
	}
	base := func(mod func(*scale.Config)) scale.Config {
		c := scale.Config{Nodes: 10, Services: 5}
		mod(&c)
		return c
	}
	for _, n := range []int{0, -1, math.MinInt, 8193, math.MaxInt} {
		s("nodes "+strconv.Itoa(n), "more Nodes than pod CIDRs, or none", base(func(c *scale.Config) { c.Nodes = n }), "Config.Nodes", strconv.Itoa(n), "expected")
	}
	for _, n := range []int{-1, 16385, math.MaxInt} {
		s("services "+strconv.Itoa(n), "more Services than one simulation can create", base(func(c *scale.Config) { c.Services = n }), "Config.Services", strconv.Itoa(n), "expected")
	}
	for _, p := range []int{-1, 101} {
		s("churn "+strconv.Itoa(p)+"%", "a share of the Nodes outside 0–100", base(func(c *scale.Config) { c.ChurnPercent = p }), "Config.ChurnPercent", strconv.Itoa(p), "expected 0 (the default, 10) to 100")
	}
	s("compression -1", "time cannot run backwards", base(func(c *scale.Config) { c.Compression = -1 }), "Config.Compression", "-1", "expected 0 (the default, 100) or more")
	for _, skip := range [][]string{{scale.BringUp}, {"Steady"}, {"nope"}, {scale.Steady, ""}, {strings.Repeat("s", huge)}} {
		field, value := fmt.Sprintf("Config.Skip[%d]", len(skip)-1), q(skip[len(skip)-1])
		if skip[0] == scale.BringUp {
			field, value = "Config.Skip", scale.BringUp
		}
		s(fmt.Sprintf("skip %q", q(strings.Join(skip, ","))), "a scenario that does not exist, or one every other needs", base(func(c *scale.Config) { c.Skip = skip }), field, value, "expected")
	}
	for _, name := range slices.Sorted(maps.Keys(hostileClusterNames)) {
		value := hostileClusterNames[name]
		s("cluster name with a "+name, "a --cluster-name no CCM runs with", base(func(c *scale.Config) { c.ClusterName = value }), "Config.ClusterName", q(value), "expected printable characters without spaces")
	}
	for _, f := range []struct {
		field string
		set   func(*scale.Config)
	}{
		{"Config.RoutePeriod", func(c *scale.Config) { c.RoutePeriod = -time.Second }},
		{"Config.NodeMonitorPeriod", func(c *scale.Config) { c.NodeMonitorPeriod = -time.Second }},
		{"Config.DriftRepairPeriod", func(c *scale.Config) { c.DriftRepairPeriod = -time.Second }},
		{"Config.Steady", func(c *scale.Config) { c.Steady = -time.Second }},
		{"Config.Timeout", func(c *scale.Config) { c.Timeout = -time.Second }},
	} {
		s(strings.TrimPrefix(f.field, "Config.")+" -1s", "a negative duration", base(f.set), f.field, "-1s", "expected")
	}
	return out
}

// hiddenText are values that read other than they are: each holds a
// control or invisible character.
var hiddenText = map[string]string{
	"NUL":            "a\x00b",
	"ESC":            "\x1b[31mred",
	"newline":        "a\nb",
	"CR":             "a\rb",
	"DEL":            "a\x7f",
	"C1 NEL":         "a\u0085b",
	"zero-width":     "a\u200bb",
	"bidi override":  "a\u202eb",
	"isolate":        "a\u2066b",
	"BOM":            "\ufeffab",
	"line separator": "a\u2028b",
}

// declarationInputs: annotations a provider declares (annotation.Set's
// Declare and ClaimPrefix) that no Service could use or no reader see as
// written. A refused declaration leaves the Set as it was.
func declarationInputs() []badInput {
	var out []badInput
	d := func(name, reason string, decl func(*annotation.Set) error, field, value, expect string) {
		set := &annotation.Set{}
		set.MustDeclare(annotation.Annotation{Name: "lb.example.com/kept", Kind: annotation.KindBool, Doc: "d"})
		out = append(out, badInput{surface: "declarations", name: name, reason: reason,
			call:  func(context.Context) error { return decl(set) },
			state: func() any { return [][]string{names(set), set.Prefixes()} },
			field: field, value: value, expect: expect})
	}
	declare := func(a annotation.Annotation) func(*annotation.Set) error {
		return func(s *annotation.Set) error { _, err := s.Declare(a); return err }
	}
	for _, what := range slices.Sorted(maps.Keys(hiddenText)) {
		v := hiddenText[what]
		d("enum value with a "+what, "an enum value a user cannot type or see", declare(annotation.Annotation{Name: "lb.example.com/algo", Kind: annotation.KindEnum, Values: []string{"ok", v}, Doc: "d"}),
			"Values[1]", q(v), "expected")
		d("string default with a "+what, "a default every Service would get, unseen", declare(annotation.Annotation{Name: "lb.example.com/cert", Kind: annotation.KindString, Default: v, Doc: "d"}),
			"Default", q(v), "expected")
	}
	big := strings.Repeat("n", huge)
	d("1 MiB name", "a name no apiserver takes, quoted whole before", declare(annotation.Annotation{Name: "lb.example.com/" + big, Kind: annotation.KindBool, Doc: "d"}),
		"Annotation.Name", q("lb.example.com/"+big), "expected a qualified name")
	d("1 MiB enum value, repeated", "a repeated value, quoted whole before", declare(annotation.Annotation{Name: "lb.example.com/algo", Kind: annotation.KindEnum, Values: []string{big, big}, Doc: "d"}),
		"Values[1]", q(big), "expected")
	d("1 MiB kind", "an unknown kind", declare(annotation.Annotation{Name: "lb.example.com/k", Kind: annotation.Kind(big), Doc: "d"}),
		"Kind", q(big), "expected one of")
	d("doc with ESC", "documentation that rewrites a terminal", declare(annotation.Annotation{Name: "lb.example.com/x", Kind: annotation.KindBool, Doc: "see \x1b[2J"}),
		"Doc", "U+001B", "expected")
	d("name declared twice", "one name, two meanings", declare(annotation.Annotation{Name: "lb.example.com/kept", Kind: annotation.KindInt, Doc: "d"}),
		"Annotation.Name", q("lb.example.com/kept"), "expected each name declared once")
	claim := func(p string) func(*annotation.Set) error {
		return func(s *annotation.Set) error { return s.ClaimPrefix(p) }
	}
	for _, p := range []struct{ name, prefix, expect string }{
		{"a shared Kubernetes prefix", "service.beta.kubernetes.io/", "expected a prefix this provider alone uses"},
		{"an empty prefix", "", "expected"},
		{"no slash", "lb.example.com", "expected"},
		{"upper-case domain", "LB.example.com/", "expected"},
		{"1 MiB prefix", strings.Repeat("a", huge) + "/", "expected"},
		{"a NUL in the prefix", "lb.exa\x00mple.com/", "expected"},
	} {
		d("claim "+p.name, "a prefix that is not the provider's alone, or no prefix at all", claim(p.prefix), "prefix", q(p.prefix), p.expect)
	}
	return out
}

// names returns the names s declares.
func names(s *annotation.Set) []string {
	var out []string
	for _, a := range s.All() {
		out = append(out, a.Name)
	}
	return out
}

// claimedInputs: Service annotations under a claimed prefix that no
// declaration has, and string values holding hidden characters, given to
// loadbalancer.Desired, which must only read the Service and its Nodes.
func claimedInputs(w *badWorld) []badInput {
	set := &annotation.Set{}
	hc := set.MustDeclare(annotation.Annotation{Name: "lb.example.com/health-check", Kind: annotation.KindString, Doc: "d"})
	set.MustClaimPrefix("lb.example.com/")
	opts := loadbalancer.DesiredInput{Cluster: badCluster, Capabilities: allLoadBalancerFeatures, Annotations: set}
	var out []badInput
	add := func(name, reason, key, value, field, shown, expect string) {
		svc := webService(func(s *v1.Service) { s.Annotations[key] = value })
		nodes := w.nodes
		out = append(out, badInput{surface: "annotation", name: name, reason: reason,
			call: func(context.Context) error {
				_, err := loadbalancer.Desired(svc, nodes, opts)
				return err
			},
			state: func() any { return copyOf(svc, nodes) },
			field: field, value: shown, expect: expect})
	}
	for _, k := range []struct{ name, key, expect string }{
		{"misspelt key", "lb.example.com/helth-check", `expected a declared annotation, such as "lb.example.com/health-check"`},
		{"wrong-case key", "lb.example.com/Health-Check", `expected "lb.example.com/health-check" (annotation names are case-sensitive)`},
		{"wrong-case prefix", "LB.Example.com/health-check", `expected "lb.example.com/health-check"`},
		{"nothing close", "lb.example.com/zzzzzzzzzzzzzz", `expected a declared annotation, such as "lb.example.com/health-check"`},
		{"1 MiB key", "lb.example.com/" + strings.Repeat("k", huge), "expected"},
	} {
		add("claimed prefix/"+k.name, "an annotation the provider would ignore, silently, before", k.key, "tcp", q(k.key), "", k.expect)
	}
	for _, what := range slices.Sorted(maps.Keys(hiddenText)) {
		v := hiddenText[what]
		add("string value/"+what, "a value that reads other than it is in an event or a log", hc.Name, v, strconv.Quote(hc.Name), q(v), "expected a non-empty string without control or invisible characters")
	}
	return out
}

// admissionInputs: policies admission cannot write: a name no object can
// have, a regenerate command that would break out of its comment line,
// and declarations the apiserver would refuse to store. WriteYAML writes
// nothing for any of them.
func admissionInputs() []badInput {
	var out []badInput
	a := func(name, reason string, in admission.PolicyInput, field, value, expect string) {
		var buf bytes.Buffer
		out = append(out, badInput{surface: "admission", name: name, reason: reason,
			call:  func(context.Context) error { return admission.WriteYAML(&buf, in) },
			state: func() any { return buf.String() },
			field: field, value: value, expect: expect})
	}
	ok := func(mod func(*admission.PolicyInput)) admission.PolicyInput {
		in := admission.PolicyInput{Name: "acme-lb", Annotations: &badAnnotations, Regenerate: "go run ./cmd/gen"}
		mod(&in)
		return in
	}
	for _, r := range []struct{ name, v string }{
		{"newline and a document", "gen\n---\nkind: Secret"}, {"a key after a newline", "gen\nkind: Secret"}, {"CR", "gen\rx"},
		{"NUL", "gen\x00"}, {"ESC", "gen\x1b[2J"}, {"bidi override", "gen\u202e"}, {"line separator", "gen\u2028x"}, {"NEL", "gen\u0085x"},
		{"invalid UTF-8", "gen\xff"},
	} {
		a("regenerate with "+r.name, "a comment line the text would end, or show other than it is", ok(func(in *admission.PolicyInput) { in.Regenerate = r.v }),
			"PolicyInput.Regenerate", q(r.v), "expected one line of printable text")
	}
	for _, n := range []struct{ name, v string }{
		{"empty", ""}, {"upper case", "Acme-LB"}, {"underscore", "acme_lb"}, {"newline", "acme\nkind: Secret"}, {"1 MiB", strings.Repeat("a", huge)},
	} {
		value, expect := q(n.v), "expected"
		if n.v == "" {
			value = "empty"
		}
		a("name "+n.name, "no object can have the name", ok(func(in *admission.PolicyInput) { in.Name = n.v }), "PolicyInput.Name", value, expect)
	}
	big := &annotation.Set{}
	for i := range 20 {
		values := make([]string, 5000)
		for j := range values {
			values[j] = fmt.Sprintf("value-%02d-%05d", i, j)
		}
		big.MustDeclare(annotation.Annotation{Name: fmt.Sprintf("lb.example.com/enum-%02d", i), Kind: annotation.KindEnum, Values: values, Doc: "d"})
	}
	a("100,000 enum values", "a policy over the apiserver's object size limit", ok(func(in *admission.PolicyInput) { in.Annotations = big }),
		"PolicyInput.Annotations", "bytes", "expected at most 1572864 bytes")
	one := &annotation.Set{}
	values := make([]string, 20000)
	for j := range values {
		values[j] = fmt.Sprintf("v%05d", j)
	}
	one.MustDeclare(annotation.Annotation{Name: "lb.example.com/long-enum", Kind: annotation.KindEnum, Values: values, Doc: "d"})
	a("an enum over the CEL bound", "an expression the apiserver's CEL parser refuses", ok(func(in *admission.PolicyInput) { in.Annotations = one }),
		`"lb.example.com/long-enum"`, "code points", "expected at most 100000")
	return out
}
