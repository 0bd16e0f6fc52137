package scale

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/util/retry"
)

// pollInterval is how often the simulator looks at the cluster while it
// waits for a goal; its reads go to the fake clientset, not the cloud.
const pollInterval = 20 * time.Millisecond

// sim is one simulation: a fake clientset, the target, the running
// controllers and what has been measured so far. Used by one goroutine.
type sim struct {
	cfg    Config
	kube   *fake.Clientset
	target *Target
	meter  *meter
	ccm    *ccm
	report *Report
	// costs are the first Target's CloudCosts, defaults filled in: those
	// of the cloud every scenario runs on.
	costs CloudCosts

	next int             // index of the next Node to create
	live map[string]bool // names of the Nodes that should exist

	// backendsAsked is when backendsExact last asked Target.Backends,
	// and backendsMissing what it answered.
	backendsAsked   time.Time
	backendsMissing string
}

// Run runs the scenarios over one simulated cluster, in order: bring-up
// (Config.Nodes Nodes join and Config.Services LoadBalancer Services are
// created over Config.Spread; goal: every Node initialized and, with
// Routes, routed, and every Service with an ingress), steady (nothing
// changes for Config.Steady, an hour by default, compressed), churn
// (ChurnPercent of the Nodes' instances terminated and their Nodes
// NotReady, as many new Nodes join; goal: the old Nodes deleted by the node-lifecycle
// controller, the new ones initialized), restart (the controllers stop
// and new ones start, over Target.Restart's provider if set; goal: every
// Service ensured again and, with Routes, the routes listed), deletion
// (every Service deleted; goal: each load balancer deleted). With
// Target.Backends, the goals of bring-up and churn also need every load
// balancer's backends to be exactly the live Nodes, so that a provider
// holding backend changes back is measured until its last write. After each
// goal the simulator waits until no write has been made for three
// compressed route periods, and counts those calls too.
//
// Each scenario's CloudMinimum is computed from Target.CloudCosts (see
// CloudCosts), the Target's that Run was given: a Target that
// Target.Restart returns is over the same cloud, and its CloudCosts are
// not read.
//
// It returns an error for an invalid cfg or target (Target.CloudCosts
// included), one wrapping
// ErrNotConverged naming the scenario and what was missing, or the
// error of a Target hook, wrapped. The Report holds the scenarios that
// ran until then. It starts and stops every goroutine it uses.
func Run(ctx context.Context, target *Target, cfg Config) (*Report, error) {
	if err := validate(target, cfg); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	costs := target.CloudCosts.withDefaults()
	s := &sim{cfg: cfg, kube: fake.NewClientset(), target: target, live: map[string]bool{}, costs: costs,
		report: &Report{Nodes: cfg.Nodes, Services: cfg.Services, CloudCosts: costs}}
	if err := s.start(ctx, target); err != nil {
		return nil, err
	}
	defer func() { s.ccm.stop() }()
	steps := []struct {
		name string
		run  func(context.Context) error
	}{{BringUp, s.bringUp}, {Steady, s.steady}, {Churn, s.churn}, {Restart, s.restart}, {Deletion, s.deletion}}
	for _, step := range steps {
		if slices.Contains(cfg.Skip, step.name) {
			s.report.Scenarios = append(s.report.Scenarios, ScenarioReport{Name: step.name, Skipped: "in Config.Skip"})
			continue
		}
		if err := step.run(ctx); err != nil {
			return s.report, err
		}
	}
	return s.report, nil
}

func validate(target *Target, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("scale.Run: %w", err)
	}
	if target == nil || target.Cloud == nil {
		return errors.New("scale.Run: Target.Cloud is nil: expected a cloudprovider.Interface")
	}
	if err := target.CloudCosts.Validate(); err != nil {
		return fmt.Errorf("scale.Run: Target.%w", err)
	}
	if target.AddInstance == nil {
		return errors.New("scale.Run: Target.AddInstance is nil: expected a function that creates an instance")
	}
	if _, ok := newMeter(target.Cloud).InstancesV2(); !ok {
		return fmt.Errorf("scale.Run: Target.Cloud %q offers no InstancesV2: expected it (the meter offers the controllers nothing else)", target.Cloud.ProviderName())
	}
	return nil
}

// start initializes target's provider and starts controllers over it.
func (s *sim) start(ctx context.Context, target *Target) error {
	target.Cloud.Initialize(nil, ctx.Done())
	s.target, s.meter = target, newMeter(target.Cloud)
	c, err := startCCM(ctx, s.kube, s.meter, s.cfg)
	if err != nil {
		return fmt.Errorf("scale.Run: %w", err)
	}
	s.ccm = c
	return nil
}

// scenario is one scenario's steps: act changes the cluster, goal says
// whether it has converged (and if not, what is missing).
type scenario struct {
	name    string
	act     func(context.Context) error
	goal    func(context.Context) (bool, string, error)
	minimum []Minimum
	cloud   CloudMinimum
	// coalesced is the scenario's CoalescedMinimum; zero: cloud.
	coalesced CloudMinimum
	settle    bool
	// lbs is how many load balancers Target.LoadBalancers must report
	// after the scenario.
	lbs int
}

// run runs sc and appends its report.
func (s *sim) run(ctx context.Context, sc scenario) error {
	m, t := s.meter, s.target
	before, driverBefore := m.snapshot(), s.driverCalls()
	start := time.Now()
	if err := sc.act(ctx); err != nil {
		return fmt.Errorf("scale.Run: %s: %w", sc.name, err)
	}
	if err := s.await(ctx, sc); err != nil {
		return err
	}
	took := time.Since(start)
	if sc.settle {
		if err := s.settle(ctx, sc.name); err != nil {
			return err
		}
	}
	if err := s.checkLoadBalancers(ctx, sc); err != nil {
		return err
	}
	if s.meter != m {
		before = nil // a restart: the new meter counted from zero
	}
	if s.target != t {
		driverBefore = nil
	}
	r := ScenarioReport{Name: sc.name, Converged: took, Calls: diff(before, s.meter.snapshot()), Minimum: sc.minimum, CloudMinimum: sc.cloud,
		CoalescedMinimum: cmp.Or(sc.coalesced, sc.cloud)}
	if s.target.DriverCalls != nil {
		r.Driver = diff(driverBefore, s.driverCalls())
	}
	s.report.Scenarios = append(s.report.Scenarios, r)
	return nil
}

// checkLoadBalancers compares Target.LoadBalancers' count, when it is
// set and the provider has load balancers, with sc.lbs.
func (s *sim) checkLoadBalancers(ctx context.Context, sc scenario) error {
	if s.target.LoadBalancers == nil || !s.hasLB() {
		return nil
	}
	n, err := s.target.LoadBalancers(ctx)
	if err != nil {
		return fmt.Errorf("scale.Run: %s: Target.LoadBalancers: %w", sc.name, err)
	}
	if n != sc.lbs {
		return fmt.Errorf("scale.Run: %s: %w: the cloud holds %d for the cluster, expected %d (one per Service)", sc.name, ErrLoadBalancerCount, n, sc.lbs)
	}
	return nil
}

func (s *sim) driverCalls() []OpCount {
	if s.target.DriverCalls == nil {
		return nil
	}
	c := s.target.DriverCalls()
	sortCounts(c)
	return c
}

// await polls sc.goal until it holds, Config.Timeout passes or ctx ends.
func (s *sim) await(ctx context.Context, sc scenario) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		ok, missing, err := sc.goal(ctx)
		if err != nil {
			return fmt.Errorf("scale.Run: %s: %w", sc.name, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("scale.Run: %s: %w after %v: %s", sc.name, ErrNotConverged, s.cfg.Timeout, missing)
		case <-tick.C:
		}
	}
}

// settle waits until the controllers have made no write for three
// compressed route periods (at least 300ms). It returns an error wrapping
// ErrNotConverged, naming the writes still being made, when that has not
// happened within Config.Timeout: a provider whose writes never stop
// (a load balancer or route rewritten on every sync) has not converged.
func (s *sim) settle(ctx context.Context, name string) error {
	quiet := max(3*s.cfg.periods().route, 300*time.Millisecond)
	start := s.meter.snapshot()
	last, since := writeCount(start), time.Now()
	deadline := time.NewTimer(s.cfg.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for time.Since(since) < quiet {
		select {
		case <-ctx.Done():
			return fmt.Errorf("scale.Run: %s: settling: %w", name, ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("scale.Run: %s: %w: writes still made %v after the goal was reached: %s", name, ErrNotConverged, s.cfg.Timeout, writesOf(diff(start, s.meter.snapshot())))
		case <-tick.C:
		}
		if n := writeCount(s.meter.snapshot()); n != last {
			last, since = n, time.Now()
		}
	}
	return nil
}

// writesOf lists the write operations of counts with their calls.
func writesOf(counts []OpCount) string {
	var out []string
	for _, c := range counts {
		if c.Write {
			out = append(out, fmt.Sprintf("%s %d (%d failed)", c.Operation, c.Calls, c.Errors+c.NotFound+c.Throttled))
		}
	}
	return strings.Join(out, ", ")
}

func writeCount(counts []OpCount) int64 {
	var n int64
	for _, c := range counts {
		if c.Write {
			n += c.Calls
		}
	}
	return n
}

// succeeded returns the calls of operation in counts that did not fail.
func succeeded(counts []OpCount, operation string) int64 {
	for _, c := range counts {
		if c.Operation == operation {
			return c.Calls - c.Errors - c.Throttled - c.NotFound
		}
	}
	return 0
}

// addNode creates the next instance and its Node.
func (s *sim) addNode(ctx context.Context) error {
	n := newNode(s.next)
	s.next++
	pid, err := s.target.AddInstance(ctx, n.Name)
	if err != nil {
		return fmt.Errorf("Target.AddInstance(%q): %w", n.Name, err)
	}
	n.Spec.ProviderID = pid
	if _, err := s.kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Node %s: %w", n.Name, err)
	}
	s.live[n.Name] = true
	return nil
}

// nodesDone reports whether exactly the live Nodes exist, each
// initialized (and routed, with routes).
func (s *sim) nodesDone(ctx context.Context) (bool, string, error) {
	list, err := s.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, "", fmt.Errorf("listing Nodes: %w", err)
	}
	_, routes := s.meter.Routes()
	pending, stale := 0, 0
	for i := range list.Items {
		n := &list.Items[i]
		switch {
		case !s.live[n.Name]:
			stale++
		case !initialized(n, routes):
			pending++
		}
	}
	absent := len(s.live) - (len(list.Items) - stale)
	if pending+stale+absent > 0 {
		return false, fmt.Sprintf("%d Nodes not initialized or routed, %d not deleted, %d missing", pending, stale, absent), nil
	}
	return true, "", nil
}

// backendsExact reports whether every load balancer's backends, as
// Target.Backends reports them, are exactly the live Nodes; it holds
// when Target.Backends is nil or the provider has no load balancers. It
// asks the cloud at most every backendsEvery, as a check of hundreds of
// load balancers of a thousand backends each is not a poll's work.
func (s *sim) backendsExact(ctx context.Context) (bool, string, error) {
	if s.target.Backends == nil || !s.hasLB() {
		return true, "", nil
	}
	if time.Since(s.backendsAsked) < backendsEvery {
		return false, s.backendsMissing, nil
	}
	s.backendsAsked = time.Now()
	got, err := s.target.Backends(ctx)
	if err != nil {
		return false, "", fmt.Errorf("Target.Backends: %w", err)
	}
	s.backendsMissing = backendsDiff(got, s.live)
	return s.backendsMissing == "", s.backendsMissing, nil
}

// backendsEvery is how often backendsExact asks Target.Backends.
const backendsEvery = 250 * time.Millisecond

// backendsDiff says which of the load balancers of got (name → Node
// names) lack live Nodes or hold others, with the first of each; "" when
// every one holds exactly the live Nodes.
func backendsDiff(got map[string][]string, live map[string]bool) string {
	var wrong []string
	for _, lb := range slices.Sorted(maps.Keys(got)) {
		have := map[string]bool{}
		var extra []string
		for _, n := range got[lb] {
			if have[n] {
				extra = append(extra, n+" twice")
			}
			have[n] = true
			if !live[n] {
				extra = append(extra, n)
			}
		}
		var missing []string
		for n := range live {
			if !have[n] {
				missing = append(missing, n)
			}
		}
		if len(missing)+len(extra) == 0 {
			continue
		}
		slices.Sort(missing)
		slices.Sort(extra)
		wrong = append(wrong, fmt.Sprintf("%s: %d Nodes missing %v, %d backends not live Nodes %v", lb, len(missing), first(missing, 3), len(extra), first(extra, 3)))
	}
	if len(wrong) == 0 {
		return ""
	}
	return fmt.Sprintf("%d load balancers without exactly the live Nodes as backends, first %s", len(wrong), wrong[0])
}

// first is the first n of s, or s.
func first(s []string, n int) []string { return s[:min(n, len(s))] }

// servicesReady reports whether every Service has an ingress.
func (s *sim) servicesReady(ctx context.Context) (bool, string, error) {
	if !s.hasLB() {
		return true, "", nil
	}
	list, err := s.kube.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, "", fmt.Errorf("listing Services: %w", err)
	}
	waiting := 0
	for _, svc := range list.Items {
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			waiting++
		}
	}
	if waiting > 0 || len(list.Items) != s.cfg.Services {
		return false, fmt.Sprintf("%d of %d Services without an ingress", waiting+s.cfg.Services-len(list.Items), s.cfg.Services), nil
	}
	return true, "", nil
}

// markNotReady sets Node name's Ready condition Unknown, as the node
// lifecycle controller of kube-controller-manager does when its kubelet
// stops reporting.
func (s *sim) markNotReady(ctx context.Context, name string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := s.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == v1.NodeReady {
				n.Status.Conditions[i].Status = v1.ConditionUnknown
			}
		}
		_, err = s.kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("marking Node %s NotReady: %w", name, err)
	}
	return nil
}
