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

	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/provider"
)

// memCloud is a small stateful in-memory ListDriver for the tests, with
// per-method call counters and error injection. The real stateful fake lives
// in package fake, which builds on this package and so cannot be used here.
type memCloud struct {
	mu        sync.Mutex
	instances map[string]instances.Instance // by ID
	hidden    map[string]bool               // IDs that List leaves out (an eventually consistent list)

	getErr  error                           // returned by GetByID and GetByName when set
	listErr error                           // returned by List when set
	onList  func(ctx context.Context) error // called inside List when set

	getByID, getByName, list atomic.Int64
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

func (c *memCloud) setListErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listErr = err
}

func (c *memCloud) GetByID(ctx context.Context, id provider.ProviderID) (instances.Instance, error) {
	c.getByID.Add(1)
	if err := ctx.Err(); err != nil {
		return instances.Instance{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.getErr != nil {
		return instances.Instance{}, c.getErr
	}
	i, ok := c.instances[id.ID]
	if !ok {
		return instances.Instance{}, fmt.Errorf("memcloud: instance %q: %w", id.ID, instances.ErrNotFound)
	}
	return i, nil
}

func (c *memCloud) GetByName(ctx context.Context, name string) (instances.Instance, error) {
	c.getByName.Add(1)
	if err := ctx.Err(); err != nil {
		return instances.Instance{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.getErr != nil {
		return instances.Instance{}, c.getErr
	}
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listErr != nil {
		return nil, c.listErr
	}
	out := make([]instances.Instance, 0, len(c.instances))
	for _, id := range slices.Sorted(maps.Keys(c.instances)) {
		if !c.hidden[id] {
			out = append(out, c.instances[id])
		}
	}
	return out, nil
}

// fakeClock is a manually advanced clock for CacheOptions.Now; onNow, when
// set, is called (without the lock) on every reading.
type fakeClock struct {
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

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
