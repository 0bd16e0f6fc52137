package ccmkit_test

// The bad-input catalogue's surfaces added by issue 29: the constructors
// of the housekeeping controllers and of the governor, and
// testing/scale's Config. Each case is held to TestBadInput's rule.

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/ccmkit/ccmkit/governor"
	"github.com/ccmkit/ccmkit/housekeeping"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/testing/scale"
)

// hardeningInputs are the cases of the surfaces issue 29 added.
func hardeningInputs(w *badWorld) []badInput {
	return append(append(housekeepingInputs(w), governorInputs()...), scaleInputs()...)
}

// refused returns err, the error of a constructor that must refuse its
// input, or an error wrapping errWrongOutcome when it built a *T anyway.
func refused[T any](built *T, err error) error {
	if built != nil {
		return fmt.Errorf("%w: a %T was built: %v", errWrongOutcome, built, err)
	}
	return err
}

// hostileClusterNames are --cluster-name values no CCM should run with:
// each would forge or hide part of every load balancer's name and tags.
var hostileClusterNames = map[string]string{
	"space":          "my cluster",
	"newline":        "c\nkind: Secret",
	"NUL":            "c\x00",
	"ESC":            "c\x1b[2J",
	"tab":            "c\t1",
	"zero-width":     "c\u200b",
	"bidi override":  "c\u202eevil",
	"1 MiB, a space": strings.Repeat("c", huge) + " ",
}

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
