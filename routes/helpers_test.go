package routes_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cloud-provider/api"

	"github.com/ccmkit/ccmkit/routes"
)

// The defaults of NamerOptions and Options, as their field docs state them.
// They repeat the package's unexported constants on purpose: a test that
// read them would not notice a changed default.
const (
	defaultMaxNameLength   = 63
	defaultAlphabet        = "abcdefghijklmnopqrstuvwxyz234567"
	defaultConflictRetries = 3
)

// maxNameLength is the longest name a Namer made with o makes.
func maxNameLength(o routes.NamerOptions) int { return cmp.Or(o.MaxLength, defaultMaxNameLength) }

// owns reports whether name has the form of a name n makes, reversible or
// hashed.
func owns(n *routes.Namer, name string) bool {
	_, err := n.Parse(name)
	return err == nil || errors.Is(err, routes.ErrHashedName)
}

// empty reports whether c changes nothing.
func empty(c routes.Changes) bool { return len(c.Delete) == 0 && len(c.Create) == 0 }

// instanceCheckerFunc adapts a function to routes.InstanceChecker.
type instanceCheckerFunc func(ctx context.Context, nodes []types.NodeName) ([]types.NodeName, error)

func (f instanceCheckerFunc) GoneTargets(ctx context.Context, nodes []types.NodeName) ([]types.NodeName, error) {
	return f(ctx, nodes)
}

// memTable is an in-memory routes.TableDriver with revisions, call counters,
// error injection and a detector for concurrent calls.
type memTable struct {
	mu        sync.Mutex
	entries   []routes.Entry
	rev       int
	reads     int
	writes    int
	conflicts int   // reject this many more writes with ErrConflict
	readErr   error // returned by every ReadTable while set
	writeErr  error // returned by every WriteTable while set
	// gate, when set, is received from before each ReadTable proceeds.
	gate chan struct{}

	// throttle, when set, throttles calls as it is told to.
	throttle *throttler

	inCall     atomic.Int32
	overlapped atomic.Bool
}

func (m *memTable) enter() func() {
	if m.inCall.Add(1) > 1 {
		m.overlapped.Store(true)
	}
	return func() { m.inCall.Add(-1) }
}

func (m *memTable) ReadTable(ctx context.Context) ([]routes.Entry, string, error) {
	if err := m.throttle.check("ReadTable"); err != nil {
		return nil, "", err
	}
	defer m.enter()()
	if m.gate != nil {
		select {
		case <-m.gate:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	if m.readErr != nil {
		return nil, "", m.readErr
	}
	out := make([]routes.Entry, len(m.entries))
	for i, e := range m.entries {
		e.TargetNodeAddresses = slices.Clone(e.TargetNodeAddresses)
		out[i] = e
	}
	return out, strconv.Itoa(m.rev), nil
}

func (m *memTable) WriteTable(ctx context.Context, revision string, entries []routes.Entry) error {
	if err := m.throttle.check("WriteTable"); err != nil {
		return err
	}
	defer m.enter()()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes++
	if m.writeErr != nil {
		return m.writeErr
	}
	if m.conflicts > 0 {
		m.conflicts--
		m.rev++ // someone else wrote
		return fmt.Errorf("mem: table at revision %d: %w", m.rev, routes.ErrConflict)
	}
	if revision != strconv.Itoa(m.rev) {
		return fmt.Errorf("mem: write at revision %s, table at %d: %w", revision, m.rev, routes.ErrConflict)
	}
	m.entries = entries
	m.rev++
	return nil
}

func (m *memTable) snapshot() []routes.Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.entries)
}

func (m *memTable) counts() (reads, writes int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reads, m.writes
}

// memRoutes is an in-memory routes.RouteDriver: a name-keyed store with call
// counters and error injection, safe for concurrent use.
type memRoutes struct {
	mu                   sync.Mutex
	entries              []routes.Entry
	lists, creates, dels int
	listErr, createErr   error
	deleteErr            error
	// throttle, when set, throttles calls as it is told to.
	throttle *throttler
}

func (m *memRoutes) ListRoutes(ctx context.Context, clusterName string) ([]routes.Entry, error) {
	if err := m.throttle.check("ListRoutes"); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lists++
	if m.listErr != nil {
		return nil, m.listErr
	}
	out := make([]routes.Entry, 0, len(m.entries))
	for _, e := range m.entries {
		e.TargetNodeAddresses = slices.Clone(e.TargetNodeAddresses)
		out = append(out, e)
	}
	return out, nil
}

func (m *memRoutes) CreateRoute(ctx context.Context, e routes.Entry) error {
	if err := m.throttle.check("CreateRoute"); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.creates++
	if m.createErr != nil {
		return m.createErr
	}
	for _, x := range m.entries {
		if x.Name == e.Name {
			return fmt.Errorf("mem: route %q: %w", e.Name, routes.ErrAlreadyExists)
		}
	}
	m.entries = append(m.entries, e)
	return nil
}

func (m *memRoutes) DeleteRoute(ctx context.Context, e routes.Entry) error {
	if err := m.throttle.check("DeleteRoute"); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dels++
	if m.deleteErr != nil {
		return m.deleteErr
	}
	n := len(m.entries)
	m.entries = slices.DeleteFunc(m.entries, func(x routes.Entry) bool { return x.Name == e.Name && x.Cluster == e.Cluster })
	if len(m.entries) == n {
		return fmt.Errorf("mem: route %q: %w", e.Name, routes.ErrNotFound)
	}
	return nil
}

func (m *memRoutes) snapshot() []routes.Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.entries)
}

func (m *memRoutes) calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lists + m.creates + m.dels
}

// throttler answers driver calls "throttled, retry after d" as drivers are
// documented to: the next left[op] calls of op (every call when -1).
type throttler struct {
	mu      sync.Mutex
	d       time.Duration
	left    map[string]int
	calls   map[string]int // calls per op, throttled ones included
	onThrot func(op string)
}

func newThrottler(d time.Duration, left map[string]int) *throttler {
	return &throttler{d: d, left: left, calls: map[string]int{}}
}

// check counts a call of op and returns the throttled error, or nil to let
// the call through; a nil throttler lets every call through.
func (th *throttler) check(op string) error {
	if th == nil {
		return nil
	}
	th.mu.Lock()
	th.calls[op]++
	n := th.left[op]
	if n > 0 {
		th.left[op] = n - 1
	}
	hook := th.onThrot
	th.mu.Unlock()
	if n == 0 {
		return nil
	}
	if hook != nil {
		hook(op)
	}
	return fmt.Errorf("acme API: %s: HTTP 429: %w", op, api.NewRetryError("too many requests", th.d))
}

func (th *throttler) count(op string) int {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.calls[op]
}
