// Package annotation declares the typed annotations of a provider: each
// one once, with its name, kind, default and documentation, parsed
// strictly (a malformed value is an *Error naming the annotation, the
// value and what was expected, never a silent default), and written out as
// a Markdown reference (Set.WriteMarkdown) so that the documentation is
// generated from the declarations.
//
// An annotation may be per port (Annotation.PerPort): its value is then a
// list of PORT=VALUE entries ("443=true,https=false"), one value of its
// kind for each Service port it names, read with Annotation.Ports; its
// Default is the value of every port it does not list.
//
// A provider declares its annotations in a Set, usually in package-level
// variables with MustDeclare, and hands the Set to loadbalancer.Options:
// the load-balancer Reconciler validates every declared annotation present
// on a Service before any cloud call, and copies those declared with
// Setting into the load balancer's provider settings. A provider that owns
// a prefix alone (its own domain, "lb.example.com/") claims it with
// Set.ClaimPrefix, so that a misspelt or wrongly cased annotation under it
// ("lb.example.com/helth-check") is reported, naming the declared one it
// most likely means, instead of silently ignored.
//
// Values are text that people read in terminals and events: a Default,
// an enum value and a string value hold no control or invisible
// character (see KindString), and every value an error quotes is cut to a
// bounded length.
//
// This package is not a schema for arbitrary objects: it reads a
// map[string]string (an object's metadata.annotations) and nothing else,
// and it keeps no state besides the declarations.
package annotation
