package routes

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	cloudprovider "k8s.io/cloud-provider"
)

// gateTable is a TableDriver whose ReadTable announces itself on entered
// and then blocks until gate is closed or its ctx ends.
type gateTable struct {
	mu      sync.Mutex
	entries []Entry
	entered chan context.Context
	gate    chan struct{}
}

func newGateTable() *gateTable {
	return &gateTable{entered: make(chan context.Context, 16), gate: make(chan struct{})}
}

func (g *gateTable) ReadTable(ctx context.Context) ([]Entry, string, error) {
	g.entered <- ctx
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, "", ctx.Err()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Entry(nil), g.entries...), "", nil
}

func (g *gateTable) WriteTable(ctx context.Context, _ string, entries []Entry) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.entries = entries
	return nil
}

func (g *gateTable) cidrs() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, e := range g.entries {
		out = append(out, e.DestinationCIDR)
	}
	return out
}

func (t *Table) pendingLen() int {
	t.batch.mu.Lock()
	defer t.batch.mu.Unlock()
	return len(t.batch.pending)
}

// waitPending waits, in a synctest bubble, until every goroutine of the
// test is blocked, and then requires n calls queued.
func waitPending(t *testing.T, tbl *Table, n int) {
	t.Helper()
	synctest.Wait()
	if got := tbl.pendingLen(); got != n {
		t.Fatalf("%d calls queued once every caller is blocked, want %d", got, n)
	}
}

func create(tbl *Table, ctx context.Context, cidr string) <-chan error {
	ch := make(chan error, 1)
	go func() {
		ch <- tbl.CreateRoute(ctx, "c", "uid-"+cidr, &cloudprovider.Route{TargetNode: "n", DestinationCIDR: cidr})
	}()
	return ch
}

var sorted = cmpopts.SortSlices(func(a, b string) bool { return a < b })

func TestBatchQueuedCallerCancelled(t *testing.T) { synctest.Test(t, testBatchQueuedCallerCancelled) }

func testBatchQueuedCallerCancelled(t *testing.T) {
	g := newGateTable()
	tbl, err := NewWholeTable(g, Options{BatchWindow: -1})
	if err != nil {
		t.Fatal(err)
	}
	lead := create(tbl, t.Context(), "10.0.1.0/24")
	<-g.entered // the leader's batch is reading
	ctx, cancel := context.WithCancel(t.Context())
	gone := create(tbl, ctx, "10.0.2.0/24")
	stay := create(tbl, t.Context(), "10.0.3.0/24")
	waitPending(t, tbl, 2)
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled queued call returned %v, want context.Canceled", err)
	}
	close(g.gate)
	for i, ch := range []<-chan error{lead, stay} {
		if err := <-ch; err != nil {
			t.Errorf("call %d: %v, want nil: another caller's cancellation must not affect it", i, err)
		}
	}
	if diff := cmp.Diff([]string{"10.0.1.0/24", "10.0.3.0/24"}, g.cidrs(), sorted); diff != "" {
		t.Errorf("table (-want +got): the cancelled queued call must not be applied:\n%s", diff)
	}
}

func TestBatchLeaderCancelledInWindow(t *testing.T) {
	synctest.Test(t, testBatchLeaderCancelledInWindow)
}

func testBatchLeaderCancelledInWindow(t *testing.T) {
	g := newGateTable()
	close(g.gate)
	tbl, err := NewWholeTable(g, Options{BatchWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	lead := create(tbl, ctx, "10.0.1.0/24")
	waitPending(t, tbl, 1)
	follow := create(tbl, t.Context(), "10.0.2.0/24")
	waitPending(t, tbl, 2)
	cancel()
	if err := <-lead; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled leader returned %v, want context.Canceled", err)
	}
	// The follower inherits the leadership and runs without a window; with
	// the hour-long window it would otherwise hang.
	if err := <-follow; err != nil {
		t.Fatalf("follower: %v", err)
	}
	if diff := cmp.Diff([]string{"10.0.2.0/24"}, g.cidrs()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}

func TestBatchTakenCallerCancelled(t *testing.T) { synctest.Test(t, testBatchTakenCallerCancelled) }

func testBatchTakenCallerCancelled(t *testing.T) {
	g := newGateTable()
	tbl, err := NewWholeTable(g, Options{BatchWindow: time.Hour, MaxBatch: 2})
	if err != nil {
		t.Fatal(err)
	}
	lead := create(tbl, t.Context(), "10.0.1.0/24")
	waitPending(t, tbl, 1)
	ctx, cancel := context.WithCancel(t.Context())
	taken := create(tbl, ctx, "10.0.2.0/24") // fills the batch: the window ends
	driverCtx := <-g.entered
	cancel()
	if err := <-taken; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call in a running batch returned %v, want context.Canceled at once", err)
	}
	if driverCtx.Err() != nil {
		t.Fatal("the batch's driver context was cancelled while the leader still waits for it")
	}
	close(g.gate)
	if err := <-lead; err != nil {
		t.Fatalf("leader: %v", err)
	}
	if diff := cmp.Diff([]string{"10.0.1.0/24", "10.0.2.0/24"}, g.cidrs(), sorted); diff != "" {
		t.Errorf("table (-want +got): a taken call's change is applied even if its caller left:\n%s", diff)
	}
}

func TestBatchDriverContextEndsWhenAllCallersLeave(t *testing.T) {
	synctest.Test(t, testBatchDriverContextEndsWhenAllCallersLeave)
}

func testBatchDriverContextEndsWhenAllCallersLeave(t *testing.T) {
	g := newGateTable()
	tbl, err := NewWholeTable(g, Options{BatchWindow: time.Hour, MaxBatch: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx1, cancel1 := context.WithCancel(t.Context())
	ctx2, cancel2 := context.WithCancel(t.Context())
	lead := create(tbl, ctx1, "10.0.1.0/24")
	waitPending(t, tbl, 1)
	follow := create(tbl, ctx2, "10.0.2.0/24")
	driverCtx := <-g.entered
	cancel2()
	<-follow
	cancel1()
	<-driverCtx.Done() // blocks forever (test timeout) if never cancelled
	if err := <-lead; !errors.Is(err, context.Canceled) {
		t.Errorf("leader whose ctx ended returned %v, want context.Canceled", err)
	}
	if got := g.cidrs(); len(got) != 0 {
		t.Errorf("table %v, want empty: the read was cancelled", got)
	}
	tbl.batch.mu.Lock()
	defer tbl.batch.mu.Unlock()
	if tbl.batch.active || len(tbl.batch.pending) != 0 {
		t.Errorf("after an abandoned batch: active=%v pending=%d, want an idle Table", tbl.batch.active, len(tbl.batch.pending))
	}
}

func TestBatchHandOffSkipsAbandonedLeader(t *testing.T) {
	var b batcher
	o1 := &op{ctx: t.Context(), lead: make(chan struct{}), done: make(chan struct{})}
	o2 := &op{ctx: t.Context(), lead: make(chan struct{}), done: make(chan struct{})}
	b.active, b.pending = true, []*op{o1, o2}
	b.mu.Lock()
	b.handOff() // a batch finished: o1 is designated
	b.mu.Unlock()
	if !o1.leader {
		t.Fatal("handOff did not designate the first pending op")
	}
	_ = b.abandon(o1, waitTaken, nil) // o1's caller gave up before it noticed
	select {
	case <-o2.lead:
	default:
		t.Fatal("the leadership of an abandoned designated leader was lost: o2 was not designated")
	}
	if !b.active || len(b.pending) != 1 {
		t.Fatalf("active=%v pending=%d, want true, 1", b.active, len(b.pending))
	}
	_ = b.abandon(o2, waitTaken, nil)
	if b.active || len(b.pending) != 0 {
		t.Fatalf("after the last op left: active=%v pending=%d, want false, 0", b.active, len(b.pending))
	}
}

// applyBatch runs batch against entries the way runBatch does: a Partial
// Diff, each call's result and dependence on the write, and the table to
// write when something changed.
func applyBatch(t *testing.T, entries []Entry, batch []*op, results []error) (next []Entry, dependent []bool, changed bool) {
	t.Helper()
	in := batchInput(batch, testNamer(t))
	in.Actual = entries
	ch := diffPartial(&in)
	dependent = ch.results(batch, results)
	if !ch.changed() {
		return entries, dependent, false
	}
	return ch.table(entries), dependent, true
}

func testNamer(t *testing.T) *Namer {
	t.Helper()
	n, err := NewNamer(NamerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A batch: deletes before creates, per-call results, and which results
// depend on the write.
func TestApply(t *testing.T) {
	namer := testNamer(t)
	named := func(hint string, e Entry) Entry { e.Name = namer.Name(hint, e.DestinationCIDR); return e }
	old := named("h-old", Entry{Cluster: "c", DestinationCIDR: "10.0.1.0/24", TargetNode: "a", Extra: 7})
	foreign := Entry{Name: "f", Cluster: "other", DestinationCIDR: "10.0.9.0/24", TargetNode: "z"}
	mk := func(create bool, hint string, e Entry) *op {
		if create {
			e = named(hint, e)
		}
		return &op{create: create, cluster: "c", hint: hint, entry: e}
	}
	moved := Entry{Cluster: "c", DestinationCIDR: "10.0.1.0/24", TargetNode: "b"}
	fresh := Entry{Cluster: "c", DestinationCIDR: "10.0.2.0/24", TargetNode: "b"}
	clash := Entry{Cluster: "c", DestinationCIDR: "10.0.9.0/24", TargetNode: "b"}
	same := old
	same.Extra = nil
	batch := []*op{
		mk(true, "h-new", moved), // needs the delete below, applied first
		mk(true, "h-n2", fresh),  // new
		mk(true, "h-n2", fresh),  // duplicate of the previous call: depends on it
		mk(true, "h-n9", clash),  // destination held by another cluster
		mk(false, "", old),       // frees 10.0.1.0/24
		mk(false, "", old),       // same delete twice: depends on the first
		mk(false, "", Entry{Name: "missing", Cluster: "c", DestinationCIDR: "10.0.7.0/24", TargetNode: "x"}),
		mk(true, "h-old", same), // re-create of what is being deleted: created again after the delete
	}
	results := make([]error, len(batch))
	next, dep, changed := applyBatch(t, []Entry{old, foreign}, batch, results)
	if !changed {
		t.Fatal("changed = false")
	}
	wantNext := []Entry{foreign, named("h-new", moved), named("h-n2", fresh)}
	// The last create re-adds old's route after its delete; its CIDR is now
	// held by "new": ErrCIDRInUse.
	if diff := cmp.Diff(wantNext, next); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	wantErr := []bool{false, false, false, true, false, false, false, true}
	wantDep := []bool{true, true, true, false, true, true, false, false}
	for i := range batch {
		if (results[i] != nil) != wantErr[i] || (wantErr[i] && !errors.Is(results[i], ErrCIDRInUse)) {
			t.Errorf("call %d: result %v, want error=%v (ErrCIDRInUse)", i, results[i], wantErr[i])
		}
		if dep[i] != wantDep[i] {
			t.Errorf("call %d: dependent=%v, want %v", i, dep[i], wantDep[i])
		}
	}
}

func TestApplyRewritesChangedRouteKeepingExtra(t *testing.T) {
	name := testNamer(t).Name("h", "10.0.1.0/24")
	stored := Entry{Name: name, Cluster: "c", DestinationCIDR: "10.0.1.0/24", TargetNode: "a", Blackhole: true, Extra: "cloud-id"}
	want := Entry{Name: name, Cluster: "c", DestinationCIDR: "10.0.1.0/24", TargetNode: "a"}
	o := &op{create: true, cluster: "c", hint: "h", entry: want}
	results := make([]error, 1)
	next, dep, changed := applyBatch(t, []Entry{stored}, []*op{o}, results)
	want.Extra = "cloud-id"
	if diff := cmp.Diff([]Entry{want}, next); diff != "" || !changed || !dep[0] || results[0] != nil {
		t.Errorf("re-create over a blackholed route: changed=%v dep=%v err=%v, table (-want +got):\n%s", changed, dep[0], results[0], diff)
	}
	next, dep, changed = applyBatch(t, next, []*op{o}, results)
	if changed || dep[0] || len(next) != 1 {
		t.Errorf("identical re-create: changed=%v dependent=%v, want no change", changed, dep[0])
	}
}
