package instances_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/provider"
)

// memCloud is the package's one hand-written driver (CONTRIBUTING.md T3): a
// small stateful in-memory ListDriver, with per-method call counters and
// fault injection, and the misbehaviours the Adapter and the Cache must
// survive. The stateful fake lives in package fake, which builds on this
// package and so cannot be used here.
type memCloud struct {
	mu        sync.Mutex
	instances map[string]instances.Instance // by ID
	hidden    map[string]bool               // IDs that List leaves out (an eventually consistent list)

	getErr    error                           // returned by GetByID and GetByName when set
	fixed     *answer                         // returned by GetByID and GetByName, whatever they are asked, when set
	listErr   error                           // returned by List when set
	listed    []instances.Instance            // returned by List instead of the stored instances when non-nil
	onList    func(ctx context.Context) error // called inside List, before it reads, when set
	afterList func()                          // called inside List, after it read, when set

	getByID, getByName, list atomic.Int64
}

// answer is what a memCloud with fixed set returns from every look-up.
type answer struct {
	inst instances.Instance
	err  error
}

// returns is a memCloud whose GetByID and GetByName return (i, err)
// whatever they are asked: a driver that breaks its contract, or fails.
func returns(i instances.Instance, err error) *memCloud {
	c := newMemCloud()
	c.fixed = &answer{inst: i, err: err}
	return c
}

func newMemCloud(insts ...instances.Instance) *memCloud {
	c := &memCloud{instances: map[string]instances.Instance{}, hidden: map[string]bool{}}
	for _, i := range insts {
		c.instances[i.ID] = i
	}
	return c
}

func (c *memCloud) put(i instances.Instance) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.instances[i.ID] = i
}

func (c *memCloud) remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.instances, id)
}

func (c *memCloud) setGetErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.getErr = err
}

// setListed makes List return listed instead of the stored instances (nil:
// the stored instances again).
func (c *memCloud) setListed(listed []instances.Instance) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listed = listed
}

func (c *memCloud) setListErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listErr = err
}

// lookup is the common part of GetByID and GetByName: it counts the call
// on calls, applies the injected faults, and otherwise returns find's
// answer, computed with c.mu held.
func (c *memCloud) lookup(ctx context.Context, calls *atomic.Int64, find func() (instances.Instance, error)) (instances.Instance, error) {
	calls.Add(1)
	if err := ctx.Err(); err != nil {
		return instances.Instance{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.getErr != nil {
		return instances.Instance{}, c.getErr
	}
	if c.fixed != nil {
		return c.fixed.inst, c.fixed.err
	}
	return find()
}

func (c *memCloud) GetByID(ctx context.Context, id provider.ProviderID) (instances.Instance, error) {
	return c.lookup(ctx, &c.getByID, func() (instances.Instance, error) {
		i, ok := c.instances[id.ID]
		if !ok {
			return instances.Instance{}, fmt.Errorf("memcloud: instance %q: %w", id.ID, instances.ErrNotFound)
		}
		return i, nil
	})
}

func (c *memCloud) GetByName(ctx context.Context, name string) (instances.Instance, error) {
	return c.lookup(ctx, &c.getByName, func() (instances.Instance, error) {
		var found []instances.Instance
		for _, i := range c.instances {
			if i.Name == name && i.State != instances.StateTerminated {
				found = append(found, i)
			}
		}
		switch len(found) {
		case 0:
			return instances.Instance{}, fmt.Errorf("memcloud: instance named %q: %w", name, instances.ErrNotFound)
		case 1:
			return found[0], nil
		}
		return instances.Instance{}, errors.New("memcloud: more than one instance named " + name)
	})
}

func (c *memCloud) List(ctx context.Context) ([]instances.Instance, error) {
	c.list.Add(1)
	c.mu.Lock()
	hook := c.onList
	c.mu.Unlock()
	if hook != nil {
		if err := hook(ctx); err != nil {
			return nil, err
		}
	}
	out, err := c.read()
	c.mu.Lock()
	after := c.afterList
	c.mu.Unlock()
	if after != nil {
		after()
	}
	return out, err
}

// read is List's answer from the stored state.
func (c *memCloud) read() ([]instances.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listErr != nil {
		return nil, c.listErr
	}
	if c.listed != nil {
		return c.listed, nil
	}
	out := make([]instances.Instance, 0, len(c.instances))
	for _, id := range slices.Sorted(maps.Keys(c.instances)) {
		if !c.hidden[id] {
			out = append(out, c.instances[id])
		}
	}
	return out, nil
}

// fakeClock is a manually advanced clock for CacheOptions.Clock; onNow,
// when set, is called (without the lock) on every reading. A Cache reads
// only Now and Since: the timer methods of the embedded nil clock.Clock
// are never called.
type fakeClock struct {
	clock.Clock
	mu    sync.Mutex
	t     time.Time
	onNow func()
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	t, hook := c.t, c.onNow
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	return t
}

func (c *fakeClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
