package loadbalancer

import "slices"

// This file plans a load balancer whose listeners keep their own pools
// (Capabilities.ListenerPools): every listener, pool, member set and
// health monitor is a cloud object of its own, and a Driver reports each
// as it is, so Plan repairs a half-done change (a listener without its
// pool, a member missing from one pool, a pool left behind by a removal)
// with the writes it lacks and no others.

// listenerPools plans the listeners of a desired Spec under
// Capabilities.ListenerPools, want and have sorted by key: removals (each
// listener's pool first, then the listener), listener updates, new
// listeners each followed by its pool, members and health check, then the
// pools of the listeners kept. Member removals come last, so that new
// members are in service before old ones leave. A changed Service port is
// a new listener and a removal: such clouds keep a listener's port
// immutable, and its pool belongs to it.
func (p *planner) listenerPools(want, have []Listener, key BackendKey) {
	d := diffListeners(want, have, true)
	for _, run := range d.removed {
		l := run[0]
		if pooled := firstPool(run); pooled != nil {
			pl := *pooled
			p.add(Action{Kind: ActionRemoveListenerPool, Listener: &pl}, "listener %s is not a port of the service: its pool goes first", l.ListenerKey.text())
			l.Pool = nil
		}
		p.add(Action{Kind: ActionRemoveListener, Listener: &l}, "listener %s%s is not a port of the service", l.ListenerKey.text(), listed(run))
	}
	for _, u := range d.updates {
		o := *orFirst(firstPool(u.old), u.old)
		n := u.new.clone()
		n.ID, n.Pool = o.ID, o.Pool.clone() // the listener's own attributes change; its pool stays
		p.updateListener(listenerUpdate{old: u.old, new: n})
		d.kept = append(d.kept, listenerUpdate{old: []Listener{n}, new: u.new})
	}
	var removals []Action
	for _, w := range d.added {
		l := w.clone()
		l.Pool = nil
		p.add(Action{Kind: ActionAddListener, Listener: &l}, "service port %s (node port %d) has no listener", w.ListenerKey.text(), w.NodePort)
		removals = p.pool(w, l, key, removals)
	}
	sortKept(d.kept)
	for _, k := range d.kept {
		removals = p.pool(k.new, *orFirst(firstPool(k.old), k.old), key, removals)
	}
	p.actions = append(p.actions, removals...)
}

// pool plans the pool of listener want, which the cloud holds as have
// (have.Pool nil: no pool yet): its creation, member additions and health
// check, and returns removals with the member removals appended (Plan
// emits those last).
func (p *planner) pool(want, have Listener, key BackendKey, removals []Action) []Action {
	wp := want.Pool
	if wp == nil { // no pool wanted: UpdateLoadBalancer, which creates none, on a listener without one
		return removals
	}
	target := want.clone() // the listener as the pool's actions see it: desired attributes, the cloud's ID
	target.ID = have.ID
	target.Pool = have.Pool.clone()
	if have.Pool == nil {
		target.Pool = &ListenerPool{}
		pl := have.clone()
		p.add(Action{Kind: ActionAddListenerPool, Listener: &pl, Pool: wp.clone()}, "listener %s has no pool", want.ListenerKey.text())
	}
	n := len(p.actions)
	p.backends(&target, wp.Backends, sortedBackends(target.Pool.Backends, key), key)
	if n < len(p.actions) && p.actions[len(p.actions)-1].Kind == ActionRemoveBackends {
		removals = append(removals, p.actions[len(p.actions)-1])
		p.actions = p.actions[:len(p.actions)-1]
	}
	if wp.HealthCheck != nil && (target.Pool.HealthCheck == nil || *target.Pool.HealthCheck != *wp.HealthCheck) {
		hc := *wp.HealthCheck
		was := "none"
		if target.Pool.HealthCheck != nil {
			was = formatHC(*target.Pool.HealthCheck)
		}
		tl := target.clone()
		p.add(Action{Kind: ActionUpdateHealthCheck, Listener: &tl, HealthCheck: &hc}, "health check of listener %s is %s; want %s", want.ListenerKey.text(), was, formatHC(hc))
	}
	return removals
}

// firstPool returns the first listener of run that has a pool, or nil.
func firstPool(run []Listener) *Listener {
	for i := range run {
		if run[i].Pool != nil {
			return &run[i]
		}
	}
	return nil
}

// orFirst returns l, or the first of run when l is nil.
func orFirst(l *Listener, run []Listener) *Listener {
	if l != nil {
		return l
	}
	return &run[0]
}

// sortKept orders kept listeners by their desired key.
func sortKept(k []listenerUpdate) {
	slices.SortStableFunc(k, func(a, b listenerUpdate) int { return a.new.ListenerKey.compare(b.new.ListenerKey) })
}
