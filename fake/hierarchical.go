package fake

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ccmkit/ccmkit/fake/internal/lbcheck"
	"github.com/ccmkit/ccmkit/internal/throttle"
	"github.com/ccmkit/ccmkit/loadbalancer"
)

// This file holds the cloud's rules for a hierarchical load balancer
// (LoadBalancerSection.Hierarchical) and for a busy one
// (LoadBalancerSection.BusyAfterWrite), as OpenStack Octavia has them: a
// load balancer is a tree of objects (listeners, a pool per listener, the
// pool's members, a health monitor per pool), each write changes one of
// them and leaves the load balancer PENDING_UPDATE for a moment, a write
// while it is refused with 409 before anything changes, and a listener's
// port is immutable. The state change of each write is still
// loadbalancer.Apply's (store.applyLB); what is here decides what the
// cloud accepts (admit), what a create makes (createAlone), the IDs it
// assigns (assignIDs), how long it stays busy (markBusy) and what it
// reports (reportTree).

// errBusy is the error of a write that was applied and left load balancer
// lb busy for about d: the write's result comes with it
// (loadbalancer.Busy).
func errBusy(lb string, d time.Duration) error {
	return loadbalancer.Busy(d, fmt.Sprintf("fake: load balancer %s is busy (PENDING_UPDATE) for about %v after this write, which was applied", lb, d))
}

// errRefusedBusy is the error of a write refused, before it changed
// anything, because load balancer lb is busy for d more (HTTP 409): it
// wraps loadbalancer.ErrRefused (so ccmkit's caches keep trusting what
// they know of lb) and the busy error with the delay.
func errRefusedBusy(lb string, d time.Duration) error {
	busy := loadbalancer.Busy(d, fmt.Sprintf("load balancer %s is busy (PENDING_UPDATE) for %v more: expected no write to it until then", lb, d))
	return fmt.Errorf("fake: 409 conflict: %w: %w", busy, loadbalancer.ErrRefused)
}

// busyOf returns the busy error err wraps (errBusy's or errRefusedBusy's)
// and whether the write was refused, or nil.
func busyOf(err error) (busy *loadbalancer.BusyError, refused bool) {
	if !errors.As(err, &busy) {
		return nil, false
	}
	return busy, errors.Is(err, loadbalancer.ErrRefused)
}

// refusedBusy reports whether err is a write refused because its load
// balancer was busy (errRefusedBusy): Calls.Busy counts them.
func refusedBusy(err error) bool {
	busy, refused := busyOf(err)
	return busy != nil && refused
}

// appliedBusy reports whether err says the write was applied and left its
// load balancer busy (errBusy): its result stands.
func appliedBusy(err error) bool {
	busy, refused := busyOf(err)
	return busy != nil && !refused
}

// admit checks a, a write of the cloud API, against the cloud's rules
// before it changes anything (mu held), and returns it as the cloud
// performs it. A write to a load balancer that is busy at now is refused
// (errRefusedBusy). On a hierarchical cloud, moreover:
//   - ActionAddListener adds the listener alone, with a new ID: a pool it
//     carries is dropped (ActionAddListenerPool creates it);
//   - ActionUpdateListener may not change a listener's key (its port and
//     protocol are immutable); a new node port is allowed, and the
//     listener keeps its pool and ID whatever the action says, since the
//     pool is an object of its own (its members take the new port);
//   - backend and health-check actions must name the listener whose pool
//     they change: the load balancer has no backends or monitor of its
//     own.
//
// Its errors wrap throttle.ErrRefused: nothing changed.
func (s *store) admit(a loadbalancer.Action, now time.Time) (loadbalancer.Action, error) {
	cur := s.lbs[a.LoadBalancerID]
	if cur != nil && a.Kind != loadbalancer.ActionCreate {
		if err := cur.checkIdle(now); err != nil {
			return a, err
		}
	}
	if !s.lbCfg.Hierarchical || a.Listener == nil && !needsListener[a.Kind] {
		return a, nil
	}
	switch {
	case needsListener[a.Kind] && a.Listener == nil:
		return a, fmt.Errorf("fake: %s on load balancer %s without a listener: expected the listener whose pool it changes: a hierarchical cloud keeps members and health monitors per listener pool (%w)", a.Kind, clip(a.LoadBalancerID), throttle.ErrRefused)
	case a.Kind == loadbalancer.ActionAddListener:
		l := *a.Listener
		l.ID, l.Pool = "", nil
		a.Listener = &l
	case a.Kind == loadbalancer.ActionUpdateListener && a.OldListener != nil:
		if o, n := a.OldListener.ListenerKey, a.Listener.ListenerKey; o != n {
			return a, fmt.Errorf("fake: listener %s (%s) of load balancer %s cannot become %s: listener ports and protocols are immutable on this cloud: expected a RemoveListener and an AddListener (%w)",
				lbcheck.ListenerText(o), clip(a.OldListener.ID), clip(a.LoadBalancerID), lbcheck.ListenerText(n), throttle.ErrRefused)
		}
		if cur != nil {
			a.Listener = keepTree(cur.lb, *a.Listener)
		}
	}
	return a, nil
}

// needsListener are the kinds that change a listener's pool on a
// hierarchical cloud, and so must name the listener (Action.Listener).
var needsListener = map[loadbalancer.ActionKind]bool{
	loadbalancer.ActionAddBackends: true, loadbalancer.ActionRemoveBackends: true, loadbalancer.ActionUpdateHealthCheck: true,
}

// keepTree returns l, the new value of a listener of lb, with the ID and
// pool the cloud holds for its key (the first listener of the key with a
// pool, else the first): an update changes the listener's attributes in
// place. The pool is shared with lb, whose stored values are replaced,
// never mutated.
func keepTree(lb *loadbalancer.LoadBalancer, l loadbalancer.Listener) *loadbalancer.Listener {
	var held *loadbalancer.Listener
	for i := range lb.Spec.Listeners {
		if h := &lb.Spec.Listeners[i]; h.ListenerKey == l.ListenerKey && (held == nil || held.Pool == nil) {
			held = h
		}
	}
	if held != nil {
		l.ID, l.Pool = held.ID, held.Pool
	}
	return &l
}

// createAlone returns an ActionCreate as a hierarchical cloud performs
// it: the load balancer object alone (tags, front end, settings, source
// ranges, session affinity), without listeners, backends or health check,
// which the Reconciler adds as writes of their own; its Spec says
// ListenerPools. Other actions are returned as they are.
func createAlone(a loadbalancer.Action) loadbalancer.Action {
	if a.Kind != loadbalancer.ActionCreate || a.Create == nil {
		return a // loadbalancer.Apply names a missing Create
	}
	lb := a.Create.Clone()
	lb.Spec.Listeners, lb.Spec.Backends, lb.Spec.HealthCheck = nil, nil, loadbalancer.HealthCheck{}
	lb.Spec.ListenerPools = true
	a.Create = lb
	return a
}

// assignIDs gives every listener and pool of lb without a cloud ID the
// next one, "lis-<n>" and "pool-<n>" (mu held). lb is the store's own new
// copy (loadbalancer.Apply's result); a pool it shares with the record it
// replaces already has its ID.
func (s *store) assignIDs(lb *loadbalancer.LoadBalancer) {
	for i := range lb.Spec.Listeners {
		l := &lb.Spec.Listeners[i]
		if l.ID == "" {
			s.nextListener++
			l.ID = "lis-" + strconv.Itoa(s.nextListener)
		}
		if l.Pool != nil && l.Pool.ID == "" {
			s.nextListenerPool++
			l.Pool.ID = "pool-" + strconv.Itoa(s.nextListenerPool)
		}
	}
}

// checkIdle returns errRefusedBusy when r is busy at now.
func (r *lbRecord) checkIdle(now time.Time) error {
	if left := r.busyUntil.Sub(now); left > 0 {
		return errRefusedBusy(r.lb.ID, left)
	}
	return nil
}

// markBusy makes r, just written at now, busy for the cloud's
// BusyAfterWrite, and returns how long (0: never busy).
func (s *store) markBusy(r *lbRecord, now time.Time) time.Duration {
	if s.busyAfter <= 0 {
		return 0
	}
	r.busyUntil = now.Add(s.busyAfter)
	return s.busyAfter
}

// reportTree sets what a hierarchical load balancer (Spec.ListenerPools)
// reports of its listeners in s, a copy: this cloud keeps the node port on
// a pool's members, so a listener whose pool has no members reports node
// port 0, which Plan takes as unknown (loadbalancer.Listener.NodePort). A
// listener without a pool reports the node port it was created with:
// Plan compares a pool-less listener's node port, and 0 would make it
// plan an UpdateListener that changes nothing. Its pool, members and
// monitor are reported exactly as they are, and the load balancer's own
// Backends and HealthCheck stay empty (the truth is per pool).
func reportTree(s *loadbalancer.Spec) {
	if !s.ListenerPools {
		return
	}
	for i := range s.Listeners {
		if p := s.Listeners[i].Pool; p != nil && len(p.Backends) == 0 {
			s.Listeners[i].NodePort = 0
		}
	}
}
