// Package admission turns a provider's declarations — its annotations
// (annotation.Set) and what its load balancers can do
// (loadbalancer.Capabilities) — into a ValidatingAdmissionPolicy and its
// binding (admissionregistration.k8s.io/v1, CEL), so that the apiserver
// itself refuses a LoadBalancer Service the provider's
// loadbalancer.Reconciler would refuse, with the Reconciler's message.
// Without it, `kubectl apply` of such a Service succeeds and the user
// learns of the problem later, from a Warning event. No webhook server is
// involved: the apiserver evaluates the policy.
//
// Policy returns the two objects; WriteYAML writes them as a manifest to
// deploy with the cloud-controller-manager. example/cmd/admission-policy
// builds a registered provider from its cloud-config, reads the
// declarations from its loadbalancer.Reconciler (Annotations,
// Capabilities) and writes the manifest; example/deploy/admission-policy.yaml
// is the fake's. Regenerate it when the declarations change.
//
// It is not a second implementation of the Reconciler's rules to trust
// instead of it: the Reconciler still checks every Service (a Service
// made before the policy, or while it was not deployed, reaches it), and
// its words are the policy's. It does not check what needs more than the
// Service: Nodes, the cloud, other Services.
//
// # What the policy checks
//
// Services of type LoadBalancer without spec.loadBalancerClass (upstream's
// service controller leaves those to another controller, and the
// Reconciler returns cloudprovider.ImplementedElsewhere for them), on
// CREATE and UPDATE (not DELETE, not the status subresource). The
// policy fails closed (failurePolicy Fail) and its binding denies
// (validationActions Deny) in every namespace.
//
//   - Every declared annotation present: its value must parse as its kind
//     does (annotation.Annotation; surrounding white space ignored): bool
//     exactly true or false; int base 10 within int64 and [Min, Max] when
//     bounded; duration a Go duration (time.ParseDuration) not negative;
//     enum one of Values; IP an IPv4 or IPv6 address without zone
//     (netip.ParseAddr, IPv4-mapped ones included, which CEL's ip library
//     refuses and the policy does not); CIDR list a comma-separated,
//     non-empty list of prefixes (netip.ParsePrefix; host bits allowed);
//     string not blank. The message is annotation.Error's, the value
//     quoted as it quotes it (cut to 256 bytes, Go's %q).
//   - A PerPort annotation (annotation.Annotation.PerPort) present: its
//     value split at commas into entries, each trimmed, none empty, each
//     PORT=VALUE cut at the first "=", PORT (trimmed) a port number or a
//     DNS-1123 label (every number is one), VALUE (trimmed) valid for the
//     kind as above, every entry in order, then no PORT listed twice; the
//     message is annotation.Error's, naming the entry at fault. Then,
//     once every annotation has parsed, each PORT of such a value must
//     name a port of the Service: one of spec.ports has it as its name,
//     or its port written in base 10 is it. The message is
//     loadbalancer.Desired's, `annotation "<name>": port "<PORT>" is not
//     a port of the service: expected a port name or number of
//     spec.ports (<list>)`, the list being the Service's ports in order,
//     each "name/port", or "port" when unnamed, joined by ", "; of
//     several PORTs that name none, it names the first in canonical
//     order (port numbers ascending, then names in byte order).
//   - The features of loadbalancer.Desired a Service asks for, when
//     Capabilities lacks them: two IP families (DualStack),
//     allocateLoadBalancerNodePorts=false (NodePortless), a UDP or SCTP
//     port (UDP, SCTP), ports of more than one protocol
//     (MixedProtocols), source ranges other than allow-all for every
//     family of the Service, from spec.loadBalancerSourceRanges or the
//     service.beta.kubernetes.io/load-balancer-source-ranges annotation
//     (SourceRanges), sessionAffinity ClientIP (ClientIPAffinity), and
//     spec.loadBalancerIP (RequestedIP). The message is the
//     loadbalancer.UnsupportedError's.
//   - spec.loadBalancerIP, which the apiserver takes as any string: an
//     address netip.ParseAddr takes without zone, of one of the Service's
//     IP families (Desired's ErrInvalidService messages).
//
// The checks come in Desired's order, and the apiserver shows the message
// of the first that fails: the first line of the Reconciler's Warning
// event for the same Service.
//
// On UPDATE only what changes is checked: an annotation whose value is the
// old Service's (for a PerPort one's PORTs, with the same spec.ports
// names and numbers), a feature the old Service already asked for (the same
// IP families, UDP port, protocols, source ranges, affinity, address) is
// let through when the old Service was already a LoadBalancer Service
// without a class. A Service made before the policy with a value the
// Reconciler refuses can still be edited, and the CCM can remove its
// finalizer; a Service that becomes a LoadBalancer Service, or loses its
// class, is checked whole, as a new one.
//
// # What it does not check
//
//   - What needs Nodes or the cloud: backends and Node provider IDs, a
//     load balancer owned by another cluster or Service
//     (loadbalancer.ErrNotOwned), a stored ID that names no load balancer
//     (loadbalancer.ErrNotFound), the cloud's own refusals, throttling.
//   - Application protocols (loadbalancer.Capabilities.AppProtocols): a
//     port whose spec.ports[].appProtocol the provider does not list, and
//     the application-protocol annotation's cross-checks
//     (loadbalancer.Options.AppProtocolAnnotation: its agreement with
//     spec.ports[].appProtocol), are refused by the Reconciler only. The
//     annotation's value is checked as every declared per-port enum's is.
//   - The requested-IP annotation's cross-checks
//     (loadbalancer.Options.RequestedIPAnnotation: its family, its
//     agreement with spec.loadBalancerIP, RequestedIP): PolicyInput does
//     not say which annotation it is. Its value is checked as every
//     declared IP annotation's is.
//   - What the apiserver's own Service validation refuses before admission
//     runs (k8s.io/kubernetes pkg/apis/core/validation, ValidateService):
//     no ports, port and node-port ranges, duplicate ports, unknown
//     protocols, externalTrafficPolicy, healthCheckNodePort, the
//     ClientIP timeout, ipFamilies, and malformed
//     spec.loadBalancerSourceRanges or source-ranges annotation (parsed
//     with the Reconciler's parser, k8s.io/utils/net ParseCIDRSloppy, or,
//     with StrictIPCIDRValidation, a stricter one). Desired's checks of
//     the same fields cannot fail for a Service the apiserver took.
//
// # Where it differs from the Reconciler
//
// TestKnownDifferences pins each of these (TestClaimedPrefixDifference
// the first):
//
//   - Under a claimed prefix (annotation.Set.ClaimPrefix), an undeclared
//     key is refused with the Reconciler's message when a declared name
//     differs from it only by case, and otherwise names the first declared
//     names under the prefix, where the Reconciler suggests the closest
//     one by edit distance; the policy names the first such key of each
//     prefix (by name), the Reconciler up to ten, sorted with the
//     malformed values.
//   - A duration within 1.8ms of the largest (2562047h47m16.854775807s),
//     or of more than 64 components ("1s" 65 times), is refused: the CEL
//     cost of summing its components, and their float64 sum that tells an
//     overflow (which would otherwise be the user's message, a CEL error),
//     are bounded.
//   - In a quoted value, unassigned and private-use code points are
//     written as they are where Go's %q escapes them (the policy escapes
//     the assigned non-printable characters: controls, format characters
//     such as U+200B, spaces other than U+0020). Invalid UTF-8, which a
//     Service in JSON cannot carry, is not escaped either.
//   - Of several ports whose protocol is refused, the message names the
//     first; the Reconciler's lists them all. The apiserver shows one
//     message, the Reconciler's event has every problem.
//   - With SourceRanges refused, more than 64 source ranges get the
//     validation's static message (CEL before Kubernetes 1.34 cannot sort;
//     the policy sorts by rank), and a range in a form only a cluster
//     without StrictIPCIDRValidation takes (leading zeros, IPv4-mapped) is
//     listed as written, after the others, where the Reconciler writes it
//     canonical.
//   - Of a PerPort value of more than 64 entries, the first 64 are
//     parsed and nothing else is checked: a later malformed entry, a
//     PORT listed twice, a PORT that names no port of the Service are
//     let through, to the Reconciler. Comparing PORTs with each other
//     and with spec.ports costs the product of their numbers, which CEL
//     in Kubernetes 1.30 (no sets, no sort) cannot do in linear time.
//   - One port named by two PORTs of one value, its number and its name
//     ("443=a,https=b"), is let through: the policy matches each PORT
//     with spec.ports, but does not resolve them to compare, and the
//     Reconciler refuses it ("port "https" is the port "443" names
//     too").
//
// # Requirements and cost
//
// The CEL is that of Kubernetes 1.30 (ValidatingAdmissionPolicy v1, the
// ip and cidr libraries): the tests compile it in that environment and
// evaluate it with the apiserver's own validator. A CEL runtime error is
// never the user's message: parsing functions (int, duration, ip, cidr)
// run only on values checked first. Every expression is linear in the
// Service (a PerPort value's comparisons bounded as above), within the apiserver's cost budgets for the largest Service it
// stores (256 KiB of annotations; TestCost).
//
// The apiserver stores a policy of at most some 1.5 MiB (etcd's request
// limit) and compiles CEL expressions of at most 100,000 code points:
// Policy refuses declarations that would make a larger policy
// (MaxObjectBytes) or a longer expression (an enum of some 5,000 short
// values has one of about 50,000), naming the annotations at fault, rather
// than return a policy the apiserver refuses. Each annotation adds some
// 0.7 to 1.2 KB to the policy (a per-port one some 8 KB), and its name
// and some 50 code points to the one expression that lists them all (the
// variable quoted): about 1,400 annotations of 20-character names fit, or
// 180 per-port ones.
//
// # Generated YAML
//
// WriteYAML marshals the two objects (sigs.k8s.io/yaml); no value of the
// input is written into the stream but as a string of theirs, so that a
// name, an enum value or a description cannot add a key or a document.
// The one text of the input it writes as such, PolicyInput.Regenerate in
// the header comment, must be one printable line.
package admission
