package loadbalancer

import "github.com/ccmkit/ccmkit/annotation"

// Annotations returns the provider's declared annotations the Reconciler
// validates on every Service (Options.Annotations); nil when it declares
// none. A generator reads them from a built provider (package admission
// turns them into admission checks with the Reconciler's messages). The
// Set is shared, not copied: treat it as read-only. Safe for concurrent use.
func (r *Reconciler) Annotations() *annotation.Set { return r.opts.Annotations }

// Capabilities returns what the provider's load balancers support
// (Options.Capabilities), the features Desired checks a Service against.
// Safe for concurrent use.
func (r *Reconciler) Capabilities() Capabilities { return r.opts.Capabilities }
