package governor

import "context"

// priorityKey is the context key of a priority cap (AtPriority).
type priorityKey struct{}

// AtPriority returns a context whose governed calls are admitted at
// priority p at most: a call whose kind is of a higher priority (see the
// package doc, Wrappers) is admitted as p; one already at p or lower keeps
// its own. Work that no one waits for, such as a periodic drift repair
// (package housekeeping), passes Background so that it only spends
// what the upstream controllers leave: its reads and writes never take the
// tokens a new Service's create or a Node's initialization needs. A
// context carries one cap; the innermost AtPriority wins.
func AtPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// capped returns k with its priority lowered to the cap of ctx, if any.
func capped(ctx context.Context, k kind) kind {
	if p, ok := ctx.Value(priorityKey{}).(Priority); ok && p > k.priority {
		k.priority = p
	}
	return k
}
