package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/ccmkit/ccmkit/provider"
)

// key is the BackendKey of the Reconciler's cloud.
func (r *Reconciler) key() BackendKey { return r.opts.Capabilities.BackendKey }

// eligible returns the nodes that can be backends, each with the addresses
// the backend key needs. A Node that cannot be a target of this cloud
// because of the Node itself is left out and reported once (skip): a
// spec.providerID that Options.Codec rejects, or, where addresses are needed
// (every key but BackendKeyProviderID), no InternalIP and a
// Options.Instances that reports its instance gone or its provider ID
// invalid. A Node with a provider ID and no InternalIP gets a copy carrying
// the addresses Options.Instances reports (see Options.Instances). Any other
// look-up error (the cloud is down or throttled) is returned: leaving the
// Node out would not be the Node's fault. nodes and its Nodes are never
// modified; when nothing is left out or replaced, nodes itself is
// returned.
func (r *Reconciler) eligible(ctx context.Context, svc *v1.Service, nodes []*v1.Node) ([]*v1.Node, error) {
	needAddrs := r.opts.Instances != nil && r.key() != BackendKeyProviderID
	checkIDs := r.opts.Codec.Scheme != ""
	if !needAddrs && !checkIDs {
		return nodes, nil
	}
	anySkipped := r.hasSkipped()
	var out []*v1.Node // a copy of nodes, made at the first change
	change := func(i int, n *v1.Node) {
		if out == nil {
			out = slices.Clone(nodes)
		}
		out[i] = n
	}
	for i, n := range nodes {
		if n == nil || n.Spec.ProviderID == "" {
			continue
		}
		if checkIDs {
			if _, err := r.opts.Codec.Parse(n.Spec.ProviderID); err != nil {
				r.skip(ctx, stageNode, svc, n, err)
				change(i, nil)
				continue
			}
		}
		if !needAddrs || hasInternalIP(n) {
			if anySkipped {
				r.unskip(stageNode, n)
			}
			continue
		}
		md, err := callFor(ctx, r, func() (*cloudprovider.InstanceMetadata, error) { return r.opts.Instances.InstanceMetadata(ctx, n) })
		switch {
		case errors.Is(err, cloudprovider.InstanceNotFound):
			r.skip(ctx, stageNode, svc, n, fmt.Errorf("it has no InternalIP yet and its instance does not exist (%w)", err))
			change(i, nil)
		case isProviderIDError(err):
			r.skip(ctx, stageNode, svc, n, err)
			change(i, nil)
		case err != nil:
			return nil, fmt.Errorf("node %q (providerID %q) has no InternalIP yet and its cloud addresses could not be read: %w", cut(n.Name), cut(n.Spec.ProviderID), err)
		case md != nil && len(md.NodeAddresses) > 0:
			if anySkipped {
				r.unskip(stageNode, n)
			}
			cp := *n // shallow: only Status.Addresses is replaced, nothing shared is written
			cp.Status.Addresses = md.NodeAddresses
			change(i, &cp)
		}
	}
	if out == nil {
		return nodes, nil
	}
	return slices.DeleteFunc(out, func(n *v1.Node) bool { return n == nil }), nil
}

// checkTargets drops from the backends that actions add (ActionCreate's,
// ActionAddBackends' and the members of ActionAddListenerPool's Pool) those whose instance Options.Instances reports gone,
// under every BackendKey (see Options.Instances for why): a desired backend
// always carries its Node's provider ID, whatever the key. Only backends
// being added are checked, so a converged load balancer costs no look-up;
// with an instances.Cache a check is no cloud call. Each dropped Node is
// reported once (skip); a look-up error is returned. nodes are the Nodes
// the backends were built from.
func (r *Reconciler) checkTargets(ctx context.Context, svc *v1.Service, actions []Action, nodes []*v1.Node) ([]Action, error) {
	actions, err := liveActions(ctx, r, svc, actions, nodes, func(a *Action) (*[]Backend, bool) {
		switch a.Kind {
		case ActionCreate:
			a.Create = a.Create.Clone()
			return &a.Create.Spec.Backends, true
		case ActionAddBackends:
			return &a.Backends, false
		case ActionAddListenerPool:
			// A Driver may create the pool with the members it will get
			// (see ActionAddListenerPool): they must be live ones too.
			a.Pool = a.Pool.clone()
			return &a.Pool.Backends, true
		}
		return nil, false
	})
	if err != nil {
		return nil, err
	}
	for _, a := range actions {
		if a.Kind == ActionCreate && a.Create.Spec.ListenerPools {
			a.Create.Spec.setBackends(a.Create.Spec.Backends) // the pools hold the live backends too
		}
	}
	return actions, nil
}

// liveActions is checkTargets for actions of any type A: adds returns a
// pointer to the backends a (a copy the caller owns) adds, nil when it adds
// none, and whether a stays when none of them is left (a creation) or goes
// (an addition).
func liveActions[A any](ctx context.Context, r *Reconciler, svc *v1.Service, actions []A, nodes []*v1.Node, adds func(a *A) (bs *[]Backend, keepEmpty bool)) ([]A, error) {
	byID := r.targetNodes(nodes)
	if byID == nil {
		return actions, nil
	}
	out := make([]A, 0, len(actions))
	for _, a := range actions {
		if bs, keepEmpty := adds(&a); bs != nil {
			kept, err := r.liveTargets(ctx, svc, *bs, byID)
			if err != nil {
				return nil, err
			}
			if *bs = kept; len(kept) == 0 && !keepEmpty {
				continue
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// targetNodes returns nodes by provider ID when checkTargets checks the
// backends it adds (Options.Instances is set), else nil.
func (r *Reconciler) targetNodes(nodes []*v1.Node) map[string]*v1.Node {
	if r.opts.Instances == nil {
		return nil
	}
	byID := map[string]*v1.Node{}
	for _, n := range nodes {
		if n != nil && n.Spec.ProviderID != "" {
			byID[n.Spec.ProviderID] = n
		}
	}
	return byID
}

// liveTargets returns bs without the backends whose Node (byID, see
// targetNodes) has no instance, each reported once (skip); a backend not
// built from byID's Nodes is kept. Each Node is looked up once, though it
// may be two backends (one per family, under BackendKeyAddress). bs itself
// is returned when nothing is dropped.
func (r *Reconciler) liveTargets(ctx context.Context, svc *v1.Service, bs []Backend, byID map[string]*v1.Node) ([]Backend, error) {
	var out []Backend
	live := map[string]bool{} // provider ID → its instance exists, once looked up
	for i, b := range bs {
		n := byID[b.ProviderID]
		if n == nil {
			if out != nil {
				out = append(out, b)
			}
			continue // not built from nodes: keep
		}
		ok, known := live[b.ProviderID]
		if !known {
			var err error
			ok, err = callFor(ctx, r, func() (bool, error) { return r.opts.Instances.InstanceExists(ctx, n) })
			if err != nil {
				return nil, fmt.Errorf("node %q (providerID %q): checking that its instance exists before adding it as a backend: %w", cut(n.Name), cut(n.Spec.ProviderID), err)
			}
			live[b.ProviderID] = ok
			if ok {
				r.unskip(stageTarget, n)
			} else {
				r.skip(ctx, stageTarget, svc, n, errors.New("its instance does not exist"))
			}
		}
		if !ok {
			if out == nil {
				out = slices.Clone(bs[:i])
			}
			continue
		}
		if out != nil {
			out = append(out, b)
		}
	}
	if out == nil {
		return bs, nil
	}
	return out, nil
}

// isProviderIDError reports whether err says a provider ID is not ours or
// not well formed: a fault of the Node, not of the cloud.
func isProviderIDError(err error) bool {
	return errors.Is(err, provider.ErrForeignProviderID) || errors.Is(err, provider.ErrMalformedProviderID) ||
		errors.Is(err, provider.ErrEmptyProviderID)
}

// maxSkipped bounds the memory of reported Nodes; past it the memory is
// cleared, so a Node may be reported once more.
const maxSkipped = 10000

// The stages that leave a Node out, each with its own memory of reported
// Nodes, so that one stage finding a Node good does not make another
// report it again.
const (
	stageNode   = "node"   // eligible: the Node's provider ID or addresses
	stageTarget = "target" // checkTargets: the Node's instance
)

// skip reports node as left out of svc's backends for reason
// (reportSkipped), unless stage reported the same node, provider ID and
// reason before, for any Service.
func (r *Reconciler) skip(ctx context.Context, stage string, svc *v1.Service, node *v1.Node, reason error) {
	key, memo := stage+"/"+node.Name, node.Spec.ProviderID+"\x00"+reason.Error()
	r.skipMu.Lock()
	if r.skipped[key] == memo {
		r.skipMu.Unlock()
		return
	}
	if len(r.skipped) >= maxSkipped {
		clear(r.skipped)
	}
	r.skipped[key] = memo
	r.skipMu.Unlock()
	r.reportSkipped(ctx, svc, node, reason)
}

// unskip forgets that stage reported node, so that it is reported again if
// it goes bad again.
func (r *Reconciler) unskip(stage string, node *v1.Node) {
	r.skipMu.Lock()
	defer r.skipMu.Unlock()
	delete(r.skipped, stage+"/"+node.Name)
}

// hasSkipped reports whether any Node is remembered as reported.
func (r *Reconciler) hasSkipped() bool {
	r.skipMu.Lock()
	defer r.skipMu.Unlock()
	return len(r.skipped) > 0
}

func hasInternalIP(n *v1.Node) bool {
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			return true
		}
	}
	return false
}
