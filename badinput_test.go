package ccmkit_test

// The bad-input catalogue (issue 13): hostile inputs against every surface
// a user or an attacker reaches through ccmkit's public API, each with the
// outcome it must have. See TestBadInput for the rule every case is held to.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/utils/clock"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ccmkit/ccmkit/annotation"
	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/fake/admin"
	"github.com/ccmkit/ccmkit/fake/register"
	"github.com/ccmkit/ccmkit/fake/statefile"
	"github.com/ccmkit/ccmkit/instances"
	"github.com/ccmkit/ccmkit/loadbalancer"
	"github.com/ccmkit/ccmkit/provider"
)

// badInput is one hostile input and the outcome it must have.
type badInput struct {
	// surface is the part of the public API the input is given to; name
	// and reason say what the input is and why it is hostile.
	surface, name, reason string
	// call gives the input to the surface as a user (or an attacker)
	// would, under ctx, and returns the surface's error. It returns an
	// error wrapping errWrongOutcome when the surface answered in a way
	// the case does not allow (an HTTP status other than the one wanted,
	// a Cloud built from a bad config).
	call func(ctx context.Context) error
	// state returns what the call must leave unchanged, compared with
	// go-cmp before and after it; nil means the surface's shared fake
	// cloud (badWorld.cloud.Snapshot).
	state func() any
	// field, value and expect are what the error must say: the field
	// (path, annotation, header or line) it names, the value as the
	// message must show it (q for a string: a Go-quoted prefix; numbers as
	// written; "" where the surface promises never to quote the input, as
	// DecodeConfig does because any value may be a credential) and the
	// words that say what was expected. A syntax error (of a YAML
	// cloud-config or a JSON state file) has no field and no value: field
	// is where it is (a line, a document, the file) or the construct at
	// fault, and expect the kind of mistake, which is what DecodeConfig
	// promises.
	field, value, expect string
	// calls are the calls to the shared fake clouds the refusal needs, by
	// operation: the minimum, and exactly what it must make (nil: none, as
	// for any input refused on its own merits; a write is never needed).
	calls map[fake.Op]int64
	// gap, when set, says why the case is known to fail today (an
	// accepted input, an unbounded message): it must still fail, and
	// the test says so once it passes, so that the mark is removed. No
	// case has one today.
	gap string
}

// withCalls returns b needing calls (see badInput.calls).
func withCalls(b badInput, calls map[fake.Op]int64) badInput {
	b.calls = calls
	return b
}

// errWrongOutcome marks an outcome other than the refusal a case wants.
var errWrongOutcome = errors.New("wrong outcome")

const (
	// plantedSecret is planted in the inputs wherever the surface must not
	// repeat it: Secret fields and every value of a cloud-config, an
	// undeclared annotation and a label of every Service and Node, the
	// Authorization and Cookie headers of every admin request.
	plantedSecret = "s3cr3t-PLANTED-7f3a9c"
	// minCases is the size the catalogue must keep (issue 13: 150; issue
	// 29 added 149 inputs over its surfaces).
	minCases = 450
	// maxMessage bounds every error message in bytes: a value is quoted
	// cut, so a 1 MiB input never makes a message near that size.
	maxMessage = 2048
	// quotedPrefix is how many bytes of a value q requires in a message:
	// fewer than the shortest cut of any surface (64 characters).
	quotedPrefix = 32
	// callTimeout is each call's deadline; a call must return before it.
	callTimeout = 5 * time.Second
	// huge is the size of the inputs meant to be too big to quote.
	huge = 1 << 20
	// lockWait is how long a call waits for a state-file lock another
	// Cloud holds (see lockInputs), far below callTimeout.
	lockWait = 100 * time.Millisecond
)

// q is how a message must show the string value s: Go-quoted (so control
// and invisible characters are escaped), cut to at most quotedPrefix
// bytes at a rune boundary, without the closing quote.
func q(s string) string {
	if len(s) > quotedPrefix {
		i := quotedPrefix
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i]
	}
	return strings.TrimSuffix(strconv.Quote(s), `"`)
}

// TestBadInput runs the catalogue. Every case is held to one rule:
//
//   - the call returns an error (not nil, not a panic) before its
//     context's deadline (callTimeout; measured with the context, not a
//     clock);
//   - the message names the field, shows the value (see badInput.value)
//     and says what was expected (badInput.expect; for a syntax error,
//     the kind of mistake), each found where a word starts ("expected" is
//     not found in "unexpected"), and is at most maxMessage bytes long,
//     however big the input;
//   - neither the message nor any log line written during the call (klog's
//     global logger and the context's logger, captured at verbosity 10)
//     contains plantedSecret;
//   - the state the case names is the same before and after the call;
//   - the shared fake clouds were called exactly as the refusal needs at
//     least (badInput.calls: none but for a refusal that needs the cloud's
//     state, and never a write), by operation, reported per surface.
//
// A case marked with a gap must break the rule (it is a known defect),
// and the test fails once it no longer does.
func TestBadInput(t *testing.T) {
	logs := badLogs.arm(t)
	w := newBadWorld(t)
	cases := slices.Concat(
		configInputs(w), providerIDInputs(), annotationInputs(w), serviceInputs(w),
		addressInputs(), instanceInputs(w), routeInputs(w), fakeConfigInputs(w),
		stateFileInputs(w), adminInputs(w), lockInputs(w), hardeningInputs(w),
	)
	if len(cases) < minCases {
		t.Errorf("the catalogue has %d cases; want at least %d", len(cases), minCases)
	}
	seen, surfaces := map[string]bool{}, map[string]int{}
	for _, c := range cases {
		surfaces[c.surface]++
	}
	for _, s := range []string{"config", "providerID", "annotation", "service", "addresses", "instances", "routes", "fakeConfig", "stateFile", "admin", "lock", "housekeeping", "governor", "scale", "declarations", "admission"} {
		if surfaces[s] < 5 {
			t.Errorf("surface %s has %d cases; want at least 5", s, surfaces[s])
		}
	}
	for _, c := range cases {
		id := c.surface + "/" + c.name
		if seen[id] {
			t.Errorf("case %s twice", id)
		}
		seen[id] = true
		t.Run(id, func(t *testing.T) {
			problems := runBadInput(t, w, logs, c)
			switch {
			case c.gap == "":
				for _, p := range problems {
					t.Errorf("%s\ninput: %s", p, c.reason)
				}
			case len(problems) == 0:
				t.Errorf("known gap %q no longer shows: remove the mark (%s)", c.gap, c.reason)
			default:
				t.Logf("known gap (%s): %s", c.gap, strings.Join(problems, "; "))
			}
		})
	}
	t.Logf("%d hostile inputs across %d surfaces", len(cases), len(surfaces))
	for _, s := range slices.Sorted(maps.Keys(surfaces)) {
		t.Logf("surface %s: %d inputs, cloud calls by operation %v (each case its minimum; writes 0)", s, surfaces[s], w.metered[s])
	}
}

// containsWord reports whether s holds word where it starts a word: not
// preceded by a letter, so that "expected" is not found in "unexpected".
func containsWord(s, word string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], word)
		if j < 0 {
			return false
		}
		if i+j == 0 || !unicode.IsLetter(rune(s[i+j-1])) {
			return true
		}
		i += j + 1
	}
}

// runBadInput calls c and returns every way the outcome breaks the rule.
func runBadInput(t *testing.T, w *badWorld, logs *logCapture, c badInput) []string {
	state := c.state
	if state == nil {
		state = func() any { return w.cloud.Snapshot() }
	}
	before, calls := state(), w.calls()
	logs.reset()
	ctx, cancel := context.WithTimeout(klog.NewContext(t.Context(), logs.logger), callTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("%w: panic: %v", errWrongOutcome, r)
			}
		}()
		done <- c.call(ctx)
	}()
	var err error
	select {
	case err = <-done:
		if ctx.Err() != nil {
			return []string{fmt.Sprintf("returned after its context ended (%v)", ctx.Err())}
		}
	case <-ctx.Done():
		return []string{fmt.Sprintf("did not return within its context's deadline (%v)", callTimeout)}
	}
	var problems []string
	if err == nil {
		problems = append(problems, "accepted: want an error")
	} else {
		msg := err.Error()
		shown := msg
		if len(shown) > 600 {
			shown = shown[:600] + "…"
		}
		t.Logf("error: %s", shown)
		if errors.Is(err, errWrongOutcome) {
			problems = append(problems, "wrong outcome: "+shown)
		}
		for _, want := range []struct{ what, s string }{{"field", c.field}, {"value", c.value}, {"expectation", c.expect}} {
			if !containsWord(msg, want.s) {
				problems = append(problems, fmt.Sprintf("error does not name the %s %#q: %q", want.what, want.s, shown))
			}
		}
		if len(msg) > maxMessage {
			problems = append(problems, fmt.Sprintf("error of %d bytes; want at most %d (values cut): %q", len(msg), maxMessage, shown))
		}
		if strings.Contains(msg, plantedSecret) {
			problems = append(problems, "the error shows the planted secret: "+shown)
		}
	}
	if line := logs.lineWith(plantedSecret); line != "" {
		problems = append(problems, "a log line shows the planted secret: "+line)
	}
	if diff := cmp.Diff(before, state(), cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})); diff != "" {
		problems = append(problems, "changed what it must not (-before +after):\n"+diff)
	}
	made := w.calls().since(calls)
	w.meter(c.surface, made)
	if made.writes > 0 {
		problems = append(problems, fmt.Sprintf("made %d cloud writes (%v); want 0, the minimum: a refused input writes nothing", made.writes, made.byOp))
	}
	if d := cmp.Diff(c.calls, made.byOp, cmpopts.EquateEmpty()); d != "" {
		problems = append(problems, "cloud calls differ from the minimum the refusal needs (-minimum +made):\n"+d)
	}
	return problems
}

// cloudCalls is what the shared fake clouds (badWorld.cloud and v4only)
// have been called, by operation.
type cloudCalls struct {
	writes int64
	byOp   map[fake.Op]int64
}

// calls returns the shared fake clouds' call counters, summed.
func (w *badWorld) calls() cloudCalls {
	out := cloudCalls{byOp: map[fake.Op]int64{}}
	for _, c := range []*fake.Cloud{w.cloud, w.v4only} {
		n := c.Calls()
		out.writes += n.Writes
		for op, k := range n.ByOp {
			out.byOp[op] += k
		}
	}
	return out
}

// since returns the calls made after before.
func (c cloudCalls) since(before cloudCalls) cloudCalls {
	out := cloudCalls{writes: c.writes - before.writes, byOp: map[fake.Op]int64{}}
	for op, k := range c.byOp {
		if d := k - before.byOp[op]; d > 0 {
			out.byOp[op] = d
		}
	}
	return out
}

// meter adds made to the calls of surface, which TestBadInput reports.
func (w *badWorld) meter(surface string, made cloudCalls) {
	if w.metered == nil {
		w.metered = map[string]map[fake.Op]int64{}
	}
	if w.metered[surface] == nil {
		w.metered[surface] = map[fake.Op]int64{}
	}
	for op, k := range made.byOp {
		w.metered[surface][op] += k
	}
}

// logCapture collects every klog line written during a call while armed,
// at verbosity 10: the global logger's (klog.V included) and that of the
// call's context. Disarmed, lines go to stderr as klog's would, at klog's
// default verbosity.
type logCapture struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	armed  bool
	config *textlogger.Config
	logger klog.Logger
	flags  flag.FlagSet // klog's own flags: -v is the global klog.V threshold
}

// badLogs is the root test binary's klog logger, installed by TestMain:
// klog.SetLogger must not race with logging, and other tests' controllers
// log from goroutines that may outlive them.
var badLogs = newLogCapture()

func newLogCapture() *logCapture {
	l := &logCapture{}
	l.config = textlogger.NewConfig(textlogger.Output(l))
	l.logger = textlogger.NewLogger(l.config)
	klog.InitFlags(&l.flags)
	return l
}

func TestMain(m *testing.M) {
	klog.SetLogger(badLogs.logger)
	os.Exit(m.Run())
}

// arm captures every line at verbosity 10 until t ends.
func (l *logCapture) arm(t *testing.T) *logCapture {
	l.setArmed(true, "10")
	t.Cleanup(func() { l.setArmed(false, "0") })
	return l
}

func (l *logCapture) setArmed(armed bool, verbosity string) {
	l.mu.Lock()
	l.armed = armed
	l.buf.Reset()
	l.mu.Unlock()
	// Both are safe for concurrent use: the logger's threshold (for
	// contextual loggers) and klog's -v (for klog.V).
	if err := errors.Join(l.config.Verbosity().Set(verbosity), l.flags.Set("v", verbosity)); err != nil {
		panic(err)
	}
}

func (l *logCapture) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.armed {
		return os.Stderr.Write(p)
	}
	return l.buf.Write(p)
}

func (l *logCapture) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Reset()
}

// lineWith returns the first captured line containing s, or "".
func (l *logCapture) lineWith(s string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for line := range strings.Lines(l.buf.String()) {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// badWorld is what the cases act on: a fake cloud in its realistic mode of
// three instances (the Node of one named unlike it) with one load balancer
// (Service default/web) and one route, a second cloud
// whose route table is IPv4 only, the admin endpoint of a third one, and a
// directory for state files.
type badWorld struct {
	cloud, v4only, admin *fake.Cloud
	// metered counts the calls the cases made to cloud and v4only, by
	// surface and operation.
	metered             map[string]map[fake.Op]int64
	lbs                 cloudprovider.LoadBalancer
	nodesAPI            cloudprovider.InstancesV2
	routesAPI, v4Routes cloudprovider.Routes
	nodes               []*v1.Node
	adminURL            string
	dir                 string
	closers             []func() // Shutdown of the Clouds the cases build
}

const badCluster = "badinput"

// renamedBadNode is the instance whose Node the world names unlike it.
const renamedBadNode = "node-3"

func newBadWorld(t *testing.T) *badWorld {
	t.Helper()
	w := &badWorld{dir: t.TempDir()}
	t.Cleanup(func() {
		for _, c := range w.closers {
			c()
		}
	})
	newCloud := func(cfg fake.Config, opts ...fake.Options) *fake.Cloud {
		var o fake.Options
		if len(opts) > 0 {
			o = opts[0]
		}
		c, err := openFake(cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		t.Cleanup(func() { close(stop); c.Shutdown() })
		c.Initialize(nil, stop)
		return c
	}
	seed := []fake.Instance{{Name: "node-1"}, {Name: "node-2"}, {Name: "node-3"}}
	// The cases' cloud is realistic (load balancers provision, calls are
	// rate limited, backends are kept by instance ID) on a clock the setup
	// moves, and on which every wait (a throttle's, the route table's
	// batch window) ends at once, so no call waits in real time.
	clock := instantClock{clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))}
	w.cloud = newCloud(fake.Config{ClusterID: badCluster, Instances: seed, Realistic: true}, fake.Options{Clock: clock})
	w.v4only = newCloud(fake.Config{ClusterID: badCluster, Instances: seed, Routes: fake.RoutesSection{IPv4Only: true}})
	w.admin = newCloud(fake.Config{Instances: seed})
	srv := httptest.NewServer(admin.Handler(w.admin))
	t.Cleanup(srv.Close)
	w.adminURL = srv.URL

	w.lbs, _ = w.cloud.LoadBalancer()
	w.nodesAPI, _ = w.cloud.InstancesV2()
	w.routesAPI, _ = w.cloud.Routes()
	w.v4Routes, _ = w.v4only.Routes()
	for _, in := range w.cloud.Snapshot().Instances {
		n, err := w.cloud.NodeFor(in.ID)
		if err != nil {
			t.Fatal(err)
		}
		n.Labels["example.com/owner-token"] = plantedSecret
		if in.Name == renamedBadNode {
			n.Name = "worker-7f3a" // named unlike its instance; found by spec.providerID
		}
		w.nodes = append(w.nodes, n)
	}
	ctx := t.Context()
	for retries := 0; ; retries++ {
		_, err := w.lbs.EnsureLoadBalancer(ctx, "kubernetes", webService(nil), w.nodes)
		var re *api.RetryError
		if !errors.As(err, &re) {
			if err != nil {
				t.Fatal(err)
			}
			if retries == 0 {
				t.Fatal("the world's load balancer was ready at once; want it to provision, as in the realistic mode")
			}
			break
		}
		clock.Step(max(re.RetryAfter(), time.Second)) // provisioning, or throttled
	}
	route := &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24"}
	if err := w.routesAPI.CreateRoute(ctx, "kubernetes", "uid-node-1", route); err != nil {
		t.Fatal(err)
	}
	if got := w.cloud.Snapshot(); len(got.LoadBalancers) != 1 || len(got.Routes) != 1 {
		t.Fatalf("the world has %d load balancers and %d routes; want 1 and 1", len(got.LoadBalancers), len(got.Routes))
	}
	return w
}

// webService returns the Service of the world's load balancer, changed by
// mod (nil: unchanged). Every Service carries the planted secret in an
// annotation that no annotation.Set declares.
func webService(mod func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web",
			Annotations: map[string]string{"example.com/api-token": plantedSecret}},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeLoadBalancer,
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports:      []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
		},
	}
	if mod != nil {
		mod(svc)
	}
	return svc
}

// copyOf returns deep copies of a Service and its Nodes, the arguments a
// pure surface must only read.
func copyOf(svc *v1.Service, nodes []*v1.Node) any {
	out := []any{svc.DeepCopy()}
	for _, n := range nodes {
		out = append(out, n.DeepCopy())
	}
	return out
}

// configInputs: cloud-configs given to provider.DecodeConfig, to the
// registered factories (cloudprovider.GetCloudProvider with "acme", the
// walkthrough provider whose token is a provider.Secret, and "fake") and to
// provider.Build. The planted secret is a value, an anchor, a key of a map
// value or a document: DecodeConfig never quotes a value, so no case
// expects one, and the registry of providers is the state.
func configInputs(w *badWorld) []badInput {
	s := plantedSecret
	decode := func(cfg string) func(context.Context) error {
		return func(context.Context) error {
			_, err := provider.DecodeConfig[Config](strings.NewReader(cfg))
			return err
		}
	}
	registered := func(name, cfg string) func(context.Context) error {
		return func(context.Context) error {
			c, err := cloudprovider.GetCloudProvider(name, strings.NewReader(cfg))
			if c != nil {
				return fmt.Errorf("%w: a provider was built: %v", errWrongOutcome, err) //nolint:errorlint // err is nil when it was built: %v prints <nil> where %w would print %!w(<nil>)
			}
			return err
		}
	}
	registry := func() any { return provider.Registered() }
	c := func(name, reason string, call func(context.Context) error, field, expect string) badInput {
		return badInput{surface: "config", name: name, reason: reason, call: call, state: registry, field: field, expect: expect}
	}
	// Over DecodeConfig's documented limit, 1 MiB.
	big := "clusterID: c\ntoken: " + s + strings.Repeat("x", 1<<20) + "\n"
	return []badInput{
		c("unknown anchor", "an alias of an anchor never defined; the YAML library quotes its name",
			decode("clusterID: c\ntoken: *"+s+"\n"), "alias (*name)", "refers to an anchor (&name) that is not defined"),
		c("flow mapping as a value", "{{S}}: the library prints the inner mapping as an invalid key",
			decode("clusterID: c\ntoken: {{"+s+"}}\n"), "mapping key", "keys must be scalars"),
		c("flow sequence as a key", "[S]: x: the library prints the sequence as an invalid key",
			decode("clusterID: c\n["+s+"]: x\n"), "mapping key", "keys must be scalars"),
		c("explicit tag mismatch", "!!int S: the library quotes the value it cannot resolve",
			decode("clusterID: c\ntoken: !!int "+s+"\n"), "explicit tag", "does not match"),
		c("unterminated quote", "a quoted scalar that never ends",
			decode("clusterID: c\ntoken: \""+s+"\n"), "line 3", "unexpected end of stream"),
		c("bad indentation", "a key indented under a scalar",
			decode("clusterID: c\ntoken: "+s+"\n  endpoint: x\n"), "line 3", "mapping values are not allowed in this context"),
		c("tab indentation", "a tab where YAML wants spaces",
			decode("clusterID: c\n\ttoken: "+s+"\n"), "line 2", "tab character that violates indentation"),
		c("duplicate field", "token twice: which one wins?",
			decode("clusterID: c\ntoken: "+s+"\ntoken: other\n"), `"token"`, "given twice"),
		c("duplicate field in JSON", "the JSON spelling of the same",
			decode(`{"clusterID": "c", "token": "`+s+`", "token": "x"}`), `"token"`, "given twice"),
		c("trailing comma in JSON", "YAML reads it; its author wrote JSON, which refuses it",
			decode(`{"clusterID": "c", "token": "`+s+`",}`), "line 1, column", "expected JSON throughout, or YAML"),
		c("comment in JSON", "a # comment after the credential",
			decode("{\"clusterID\": \"c\", \"token\": \""+s+"\" # the token\n}"), "line 1, column", "not valid JSON"),
		c("unknown field", "a misspelled key holding the credential",
			decode("clusterID: c\ntokn: "+s+"\n"), `"tokn"`, "not a field of the configuration"),
		c("field in another case", "Token: matched by encoding/json, not by ccmkit",
			decode("clusterID: c\nToken: "+s+"\n"), `"Token"`, `expected "token"`),
		c("sequence for a string", "the secret inside a wrong type",
			decode("clusterID: c\ntoken: ["+s+"]\n"), `"token"`, "expected a string"),
		c("mapping for a string", "the secret as a key of a wrong type",
			decode("clusterID: c\ntoken: {"+s+": 1}\n"), `"token"`, "expected a string"),
		c("number for a mapping", "the whole config is a scalar",
			decode("42\n"), "got a number", "expected a mapping"),
		c("sequence at the top", "a list instead of a mapping",
			decode("- "+s+"\n"), "got a sequence", "expected a mapping"),
		c("over the size limit", "a 1 MiB token: decoding 64 MiB took seconds and gigabytes",
			decode(big), "cloud-config is", "expected at most 1048576 bytes"),
		c("second document", "a token in a document the decoder would ignore",
			decode("clusterID: c\n---\ntoken: "+s+"\n"), "YAML document 2", "expected a single document"),
		c("second document malformed", "a syntax error in the ignored document",
			decode("clusterID: c\n---\ntoken: *"+s+"\n"), "YAML document 2", "anchor"),
		c("JSON with trailing data", "a second JSON value after the object",
			decode(`{"clusterID": "c"} {"token": "`+s+`"}`), "YAML document 2", "expected <document start>"),
		c("invalid UTF-8", "bytes that are no characters next to the secret",
			decode("clusterID: c\ntoken: "+s+"\xff\xfe\n"), "UTF-8", "invalid"),
		c("NUL byte", "a control character YAML forbids",
			decode("clusterID: c\ntoken: "+s+"\x00\n"), "control characters", "are not allowed"),
		c("alias bomb", "a billion laughs: nested aliases that expand exponentially",
			decode(aliasBomb()), "aliases", "beyond the parser's limit"),
		c("deep nesting", "10,000 nested sequences: encoding/json's nesting limit, whose error has neither line nor limit",
			decode("clusterID: c\nendpoint: "+strings.Repeat("[", 10000)+s+strings.Repeat("]", 10000)+"\n"), "line 2", "expected at most 10000 levels"),
		c("deeper nesting", "10,001 nested sequences: go.yaml.in/yaml/v2's limit",
			decode("clusterID: c\nendpoint: "+strings.Repeat("[", 10001)+s+strings.Repeat("]", 10001)+"\n"), "line 2", "expected at most 10000 levels"),
		c("Validate", "no clusterID: the config's own Validate refuses it, the token is not in its error",
			decode("endpoint: https://api.acme\ntoken: "+s+"\n"), "clusterID", "expected the tag of this cluster's resources"),
		c("registered acme", "the same unknown field through --cloud-provider=acme",
			registered("acme", "clusterID: c\nsecret: "+s+"\n"), `"secret"`, "not a field of the configuration"),
		c("registered acme anchor", "an unknown anchor through --cloud-provider=acme",
			registered("acme", "token: *"+s+"\n"), "alias (*name)", "refers to an anchor (&name) that is not defined"),
		c("registered fake anchor", "an unknown anchor in the fake's cloud-config",
			registered("fake", "clusterID: *"+s+"\n"), "alias (*name)", "refers to an anchor (&name) that is not defined"),
		c("fake duration without unit", "provisioningDelay: \"5\"",
			registered("fake", "loadBalancers:\n  provisioningDelay: \"5\"\n"), "loadBalancers.provisioningDelay", "expected"),
		c("fake duration as number", "provisioningDelay: 5",
			registered("fake", "loadBalancers:\n  provisioningDelay: 5\n"), "loadBalancers.provisioningDelay", "expected"),
		c("fake duration huge", "a 10 kB malformed duration is quoted cut",
			registered("fake", "loadBalancers:\n  provisioningDelay: \"1"+strings.Repeat("x", 10000)+"\"\n"), "loadBalancers.provisioningDelay", "expected"),
		c("fake negative duration", "provisioningDelay: -1s",
			registered("fake", "loadBalancers:\n  provisioningDelay: -1s\n"), "loadBalancers.provisioningDelay", "expected zero (no delay) or a positive duration"),
		c("fake cache TTL malformed", "instanceCacheTTL is a provider.Duration: DecodeConfig names the field, not the value",
			registered("fake", "instanceCacheTTL: "+s+"\n"), "instanceCacheTTL", "expected"),
		c("fake wrong type", "realistic: a string for a boolean",
			registered("fake", "realistic: \""+s+"\"\n"), `"realistic"`, "expected a boolean"),
		c("fake unknown nested field", "a field the fake does not have, under loadBalancers",
			registered("fake", "loadBalancers:\n  password: "+s+"\n"), `"password"`, "not a field of the configuration"),
		c("fake second document", "a second document after the fake's config",
			registered("fake", "clusterID: c\n---\nclusterID: "+s+"\n"), "YAML document 2", "expected a single document"),
		c("build over the size limit", "provider.Build with the fake's factory and a 1 MiB config",
			func(context.Context) error {
				c, err := provider.Build("fake", strings.NewReader(big), register.Factory)
				if c != nil {
					return fmt.Errorf("%w: a provider was built", errWrongOutcome)
				}
				return err
			}, "cloud-config is", "expected at most 1048576 bytes"),
	}
}

// aliasBomb is a YAML "billion laughs": ten levels of ten aliases each.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("a0: &a0 [\"" + plantedSecret + "\"]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	b.WriteString("token: *a9\n")
	return b.String()
}

// providerIDInputs: provider IDs given to provider.Codec.Parse, as every
// block parses a Node's spec.providerID. The codec is a value, so there is
// no state to change.
func providerIDInputs() []badInput {
	codec := provider.Codec{Scheme: fake.ProviderName}
	p := func(name, reason, id, expect string) badInput {
		value := q(id)
		if id == "" {
			value = ""
		}
		return badInput{surface: "providerID", name: name, reason: reason,
			call:  func(context.Context) error { _, err := codec.Parse(id); return err },
			state: func() any { return codec }, field: "provider ID", value: value, expect: expect}
	}
	long := "fake://" + strings.Repeat("a", 10000) + "?"
	return []badInput{
		p("empty", "a Node without a provider ID given to Parse", "", `expected "<scheme>://<id>"`),
		p("scheme only", "nothing after ://", "fake://", `expected an instance ID after "://"`),
		p("no separator", "an ID without a scheme", "i-1", `expected "<scheme>://<id>"`),
		p("one slash", "fake:/i-1", "fake:/i-1", `expected "<scheme>://<id>"`),
		p("empty scheme", "://i-1", "://i-1", "scheme is empty"),
		p("bad scheme character", "a space in the scheme", "fa ke://i-1", "expected a letter, digit"),
		p("traversal", "fake://../../i-1 joined into a URL climbs out of it", "fake://../../i-1", "expected a name"),
		p("dot-dot", "fake://..", "fake://..", "expected a name"),
		p("dot", "fake://.", "fake://.", "expected a name"),
		p("dot segment", "fake://a/./i-1", "fake://a/./i-1", "expected a name"),
		p("query", "a query another layer would drop or interpret", "fake://i-1?x=1", "expected none"),
		p("fragment", "a fragment", "fake://i-1#top", "expected none"),
		p("escaped slash", "%2F decodes to / in another layer", "fake://a%2Fb", "expected the characters themselves"),
		p("percent", "a lone %", "fake://i-1%", "expected the characters themselves"),
		p("backslash", "a Windows path separator", `fake://a\b`, "expected none"),
		p("empty segment", "fake://a//i-1", "fake://a//i-1", "expected a non-empty segment"),
		p("trailing slash", "fake://i-1/", "fake://i-1/", "expected a non-empty segment"),
		p("zero-width space", "i-\u200b1 looks like i-1", "fake://i-\u200b1", "expected visible characters"),
		p("zero-width joiner", "an invisible joiner", "fake://i\u200d-1", "expected visible characters"),
		p("right-to-left override", "the ID reads backwards in a terminal", "fake://i-\u202e1", "expected visible characters"),
		p("byte-order mark", "an invisible BOM in front", "fake://\ufeffi-1", "expected visible characters"),
		p("space", "white space", "fake://i 1", "expected printable characters"),
		p("newline", "a newline forges a log line", "fake://i-1\nlevel=error", "expected printable characters"),
		p("NUL", "a NUL byte", "fake://i-1\x00", "expected printable characters"),
		p("line separator", "U+2028", "fake://i-1\u2028", "expected printable characters"),
		p("invalid UTF-8", "bytes that are no characters", "fake://i-\xff", "expected printable characters"),
		p("foreign scheme", "another provider's Node", "aws://i-1", `expected "fake"`),
		p("scheme in other case", "the node controller compares the scheme exactly", "FAKE://i-1", `expected "fake"`),
		p("huge", "a 10 kB ID is quoted cut", long, "expected none"),
	}
}

// badAnnotations declares one annotation of every kind: the fake declares
// none, so the catalogue declares a provider's set as a user would.
var (
	badAnnotations annotation.Set
	annProxy       = badAnnotations.MustDeclare(annotation.Annotation{Name: "lb.example.com/proxy-protocol", Kind: annotation.KindBool, Doc: "PROXY protocol to the backends."})
	annIdle        = badAnnotations.MustDeclare(annotation.Annotation{Name: "lb.example.com/idle-timeout-seconds", Kind: annotation.KindInt, Min: 1, Max: 3600, Doc: "Idle timeout.", Setting: true})
	annDrain       = badAnnotations.MustDeclare(annotation.Annotation{Name: "lb.example.com/drain", Kind: annotation.KindDuration, Doc: "Connection draining."})
	annAlgorithm   = badAnnotations.MustDeclare(annotation.Annotation{Name: "lb.example.com/algorithm", Kind: annotation.KindEnum, Values: []string{"round-robin", "least-connections"}, Doc: "Balancing algorithm.", Setting: true})
	annIP          = badAnnotations.MustDeclare(annotation.Annotation{Name: "lb.example.com/ip", Kind: annotation.KindIP, Doc: "Requested address."})
	annAllow       = badAnnotations.MustDeclare(annotation.Annotation{Name: "lb.example.com/allowed-cidrs", Kind: annotation.KindCIDRList, Doc: "Allowed clients."})
	annCert        = badAnnotations.MustDeclare(annotation.Annotation{Name: "lb.example.com/certificate", Kind: annotation.KindString, Doc: "Certificate name."})
)

// allLoadBalancerFeatures is every optional load-balancer feature, as the
// fake offers them by default.
var allLoadBalancerFeatures = loadbalancer.Capabilities{
	UDP: true, SCTP: true, MixedProtocols: true, DualStack: true, NodePortless: true,
	SourceRanges: true, ClientIPAffinity: true, RequestedIP: true,
}

// annotationInputs: malformed values of each declared annotation on the
// world's Service, given to loadbalancer.Desired, which must only read the
// Service and its Nodes.
func annotationInputs(w *badWorld) []badInput {
	opts := loadbalancer.DesiredInput{Cluster: badCluster, Capabilities: allLoadBalancerFeatures,
		Annotations: &badAnnotations, RequestedIPAnnotation: annIP}
	big := strings.Repeat("x", huge)
	var out []badInput
	for _, a := range []struct {
		ann    *annotation.Annotation
		expect string
		values map[string]string // name -> value
	}{
		{annProxy, `expected "true" or "false"`, map[string]string{"yes": "yes", "upper case": "TRUE", "one": "1", "empty": "", "1 MiB": big}},
		{annIdle, "expected", map[string]string{"word": "abc", "below min": "0", "above max": "3601", "fraction": "1.5", "hex": "0x10", "overflow": "99999999999999999999", "1 MiB": big}},
		{annDrain, "expected", map[string]string{"no unit": "5", "negative": "-1s", "words": "1 hour", "1 MiB": big}},
		{annAlgorithm, "expected one of", map[string]string{"other case": "Round-Robin", "unknown": "random", "empty": "", "1 MiB": big}},
		{annIP, "expected", map[string]string{"octet": "10.0.0.256", "zone": "fe80::1%eth0", "CIDR": "10.0.0.0/8", "1 MiB": big}},
		{annAllow, "expected", map[string]string{"prefix length": "10.0.0.0/33", "address": "10.0.0.1", "comma": ",", "empty entry": "10.0.0.0/8,,", "1 MiB": big}},
		{annCert, "expected", map[string]string{"empty": "", "blank": "   "}},
	} {
		for _, name := range slices.Sorted(maps.Keys(a.values)) {
			value := a.values[name]
			svc := webService(func(s *v1.Service) { s.Annotations[a.ann.Name] = value })
			nodes := w.nodes
			out = append(out, badInput{surface: "annotation", name: a.ann.Name + "/" + name,
				reason: fmt.Sprintf("%s annotation %q", a.ann.Kind, q(value)),
				call: func(context.Context) error {
					_, err := loadbalancer.Desired(svc, nodes, opts)
					return err
				},
				state: func() any { return copyOf(svc, nodes) },
				field: strconv.Quote(a.ann.Name), value: q(value), expect: a.expect})
		}
	}
	return out
}

// serviceInputs: Services the kube-apiserver would refuse, or a provider
// cannot build, given to the fake's EnsureLoadBalancer (and
// UpdateLoadBalancer) under the name and UID of the world's load balancer,
// with node lists a controller may pass (nil, empty, a nil entry, Nodes
// without a provider ID or addresses, a foreign provider ID). Its load
// balancer, and the arguments, must stay as they were.
func serviceInputs(w *badWorld) []badInput {
	noPID := w.nodes[0].DeepCopy()
	noPID.Spec.ProviderID = ""
	noAddr := w.nodes[1].DeepCopy()
	noAddr.Status.Addresses = nil
	foreign := w.nodes[2].DeepCopy()
	foreign.Spec.ProviderID = "aws:///eu-1/i-9"
	nodeLists := [][]*v1.Node{nil, {}, {nil}, {noPID}, {noAddr}, {foreign, noPID, noAddr}, w.nodes}
	big := strings.Repeat("x", huge)
	n := 0
	s := func(name, reason string, mod func(*v1.Service), field, value, expect string) badInput {
		svc := webService(mod)
		nodes := nodeLists[n%len(nodeLists)]
		n++
		return badInput{surface: "service", name: name, reason: reason,
			call: func(ctx context.Context) error {
				_, err := w.lbs.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes)
				return err
			},
			state: func() any { return []any{w.cloud.Snapshot(), copyOf(svc, nodes)} },
			field: field, value: value, expect: expect}
	}
	timeout := func(t int32) func(*v1.Service) {
		return func(s *v1.Service) {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(t)}}
		}
	}
	port := func(f func(*v1.ServicePort)) func(*v1.Service) {
		return func(s *v1.Service) { f(&s.Spec.Ports[0]) }
	}
	local := func(hc int32) func(*v1.Service) {
		return func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = hc
		}
	}
	const aff, ranges = "spec.sessionAffinityConfig.clientIP.timeoutSeconds", "spec.loadBalancerSourceRanges"
	cases := []badInput{
		s("ClientIP timeout negative", "the apiserver allows 1-86400 s", timeout(-5), aff, "-5", "expected 1-86400"),
		s("ClientIP timeout zero", "zero seconds of affinity", timeout(0), aff, "0", "expected 1-86400"),
		s("ClientIP timeout too long", "eleven days", timeout(999999), aff, "999999", "expected 1-86400"),
		s("externalTrafficPolicy Bogus", "neither Cluster nor Local",
			func(s *v1.Service) { s.Spec.ExternalTrafficPolicy = "Bogus" }, "spec.externalTrafficPolicy", q("Bogus"), "expected Cluster or Local"),
		s("externalTrafficPolicy lower case", "local is not Local",
			func(s *v1.Service) { s.Spec.ExternalTrafficPolicy = "local" }, "spec.externalTrafficPolicy", q("local"), "expected Cluster or Local"),
		s("externalTrafficPolicy 1 MiB", "a huge policy is quoted cut",
			func(s *v1.Service) { s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicy(big) }, "spec.externalTrafficPolicy", q(big), "expected Cluster or Local"),
		s("sessionAffinity unknown", "Sticky is no affinity",
			func(s *v1.Service) { s.Spec.SessionAffinity = "Sticky" }, "spec.sessionAffinity", q("Sticky"), "expected None or ClientIP"),
		s("port zero", "port 0", port(func(p *v1.ServicePort) { p.Port = 0 }), "spec.ports[0].port", "0", "expected 1-65535"),
		s("port negative", "port -1", port(func(p *v1.ServicePort) { p.Port = -1 }), "spec.ports[0].port", "-1", "expected 1-65535"),
		s("port too big", "port 70000", port(func(p *v1.ServicePort) { p.Port = 70000 }), "spec.ports[0].port", "70000", "expected 1-65535"),
		s("nodePort zero", "no node port allocated", port(func(p *v1.ServicePort) { p.NodePort = 0 }), "spec.ports[0].nodePort", "0", "expected an allocated node port"),
		s("nodePort negative", "node port -5", port(func(p *v1.ServicePort) { p.NodePort = -5 }), "spec.ports[0].nodePort", "-5", "expected an allocated node port"),
		s("nodePort too big", "node port 70000", port(func(p *v1.ServicePort) { p.NodePort = 70000 }), "spec.ports[0].nodePort", "70000", "expected an allocated node port"),
		s("protocol HTTP", "not a Service protocol", port(func(p *v1.ServicePort) { p.Protocol = "HTTP" }), "spec.ports[0].protocol", q("HTTP"), "expected TCP, UDP or SCTP"),
		s("protocol lower case", "tcp is not TCP", port(func(p *v1.ServicePort) { p.Protocol = "tcp" }), "spec.ports[0].protocol", q("tcp"), "expected TCP, UDP or SCTP"),
		s("no ports", "a load balancer with no listener",
			func(s *v1.Service) { s.Spec.Ports = nil }, "spec.ports", "", "expected at least one port"),
		s("duplicate port", "80/TCP twice",
			func(s *v1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "again", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30081})
			},
			"spec.ports", "80", "expected unique (protocol, port)"),
		s("ipFamilies repeated", "IPv4 twice",
			func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv4Protocol} }, "spec.ipFamilies", `["IPv4" "IPv4"]`, "expected one family or IPv4 and IPv6"),
		s("ipFamilies unknown", "IPv5",
			func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{"IPv5"} }, "spec.ipFamilies", q("IPv5"), "expected IPv4 or IPv6"),
		s("ipFamilies three", "three families",
			func(s *v1.Service) {
				s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol, v1.IPv4Protocol}
			}, "spec.ipFamilies", `["IPv4" "IPv6" "IPv4"]`, "expected one family or IPv4 and IPv6"),
		s("source range prefix length", "/33",
			func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/33"} }, ranges, q("10.0.0.0/33"), "expected a list of CIDRs"),
		s("source range word", "not a CIDR",
			func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"nope"} }, ranges, q("nope"), "expected a list of CIDRs"),
		s("source range address", "an address without a prefix length",
			func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.1"} }, ranges, q("10.0.0.1"), "expected a list of CIDRs"),
		s("source range annotation", "the annotation's list holds a word",
			func(s *v1.Service) { s.Annotations[v1.AnnotationLoadBalancerSourceRangesKey] = "10.0.0.0/8,nope" },
			v1.AnnotationLoadBalancerSourceRangesKey, q("nope"), "expected a comma-separated list of CIDRs"),
		s("loadBalancerIP word", "not an address",
			func(s *v1.Service) { s.Spec.LoadBalancerIP = "nope" }, "spec.loadBalancerIP", q("nope"), "expected an IPv4 or IPv6 address"),
		s("loadBalancerIP zone", "an address with a zone",
			func(s *v1.Service) { s.Spec.LoadBalancerIP = "fe80::1%eth0" }, "spec.loadBalancerIP", q("fe80::1%eth0"), "expected an IPv4 or IPv6 address"),
		s("loadBalancerIP other family", "an IPv6 address for an IPv4 Service",
			func(s *v1.Service) { s.Spec.LoadBalancerIP = "2001:db8::1" }, "requested IP 2001:db8::1", "IPv6", "expected a family of spec.ipFamilies"),
		s("healthCheckNodePort zero", "Local without a health-check port", local(0), "spec.healthCheckNodePort", "0", "expected an allocated port (1-65535)"),
		s("healthCheckNodePort too big", "Local with port 70000", local(70000), "spec.healthCheckNodePort", "70000", "expected an allocated port (1-65535)"),
		s("type ClusterIP", "not a LoadBalancer Service",
			func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP }, "spec.type", q("ClusterIP"), `expected "LoadBalancer"`),
		s("type empty", "no type at all",
			func(s *v1.Service) { s.Spec.Type = "" }, "spec.type", `""`, `expected "LoadBalancer"`),
		{surface: "service", name: "nil Service", reason: "EnsureLoadBalancer(nil): a programming error of a caller, not a panic",
			call: func(ctx context.Context) error {
				_, err := w.lbs.EnsureLoadBalancer(ctx, "kubernetes", nil, w.nodes)
				return err
			}, field: "service", expect: "expected a Service"},
		{surface: "service", name: "nil Service update", reason: "UpdateLoadBalancer(nil)",
			call:  func(ctx context.Context) error { return w.lbs.UpdateLoadBalancer(ctx, "kubernetes", nil, w.nodes) },
			field: "service", expect: "expected a Service"},
	}
	for _, g := range []struct {
		name, field string
		mod         func(*v1.Service)
		expect      string
	}{
		{"sessionAffinity 1 MiB", "spec.sessionAffinity", func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinity(big) }, "expected None or ClientIP"},
		{"protocol 1 MiB", "spec.ports[0].protocol", port(func(p *v1.ServicePort) { p.Protocol = v1.Protocol(big) }), "expected TCP, UDP or SCTP"},
		{"loadBalancerIP 1 MiB", "spec.loadBalancerIP", func(s *v1.Service) { s.Spec.LoadBalancerIP = big }, "expected an IPv4 or IPv6 address"},
		{"ipFamilies 1 MiB", "spec.ipFamilies", func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPFamily(big)} }, "expected IPv4 or IPv6"},
	} {
		cases = append(cases, s(g.name, "a huge value is quoted cut", g.mod, g.field, q(big), g.expect))
	}
	return append(cases, s("source range annotation 1 MiB", "the upstream helper's error would repeat the whole annotation",
		func(s *v1.Service) { s.Annotations[v1.AnnotationLoadBalancerSourceRangesKey] = "nope" + big },
		v1.AnnotationLoadBalancerSourceRangesKey, q("nope"+big), "expected a comma-separated list of CIDRs"))
}

// addressInputs: node addresses a cloud returns, given to
// instances.BuildAddresses, which must only read them.
func addressInputs() []badInput {
	internal := func(ip string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip} }
	good := internal("10.0.0.1")
	a := func(name, reason string, addrs []v1.NodeAddress, opts instances.AddressPolicy, field, value, expect string) badInput {
		return badInput{surface: "addresses", name: name, reason: reason,
			call: func(context.Context) error {
				_, err := instances.BuildAddresses(addrs, opts)
				return err
			},
			state: func() any { return slices.Clone(addrs) },
			field: field, value: value, expect: expect}
	}
	ip := func(name, addr, expect string) badInput {
		return a(name, "InternalIP "+strconv.Quote(addr), []v1.NodeAddress{good, internal(addr)}, instances.AddressPolicy{},
			"addresses[1]", q(addr), expect)
	}
	none := instances.AddressPolicy{}
	cases := []badInput{
		ip("octet over 255", "10.0.0.256", "expected"),
		ip("word", "nope", "expected"),
		ip("empty", "", "expected"),
		ip("unspecified IPv4", "0.0.0.0", "expected"),
		ip("unspecified IPv6", "::", "expected"),
		ip("multicast IPv4", "224.0.0.1", "expected"),
		ip("multicast IPv6", "ff02::1", "expected"),
		ip("zone", "fe80::1%eth0", "expected"),
		ip("leading zero", "010.0.0.1", "expected"),
		ip("CIDR", "10.0.0.0/24", "expected"),
		ip("IPv4-mapped IPv6", "::ffff:10.0.0.1", "expected"),
		ip("trailing newline", "10.0.0.2\n", "expected"),
		a("unknown type", "type Bogus", []v1.NodeAddress{good, {Type: "Bogus", Address: "10.0.0.2"}}, none, "addresses[1]", q("Bogus"), "expected"),
		a("empty type", "no type", []v1.NodeAddress{good, {Address: "10.0.0.2"}}, none, "addresses[1]", `""`, "expected"),
		a("DNS name with underscore", "not a DNS-1123 subdomain", []v1.NodeAddress{good, {Type: v1.NodeInternalDNS, Address: "a_b.example"}}, none, "addresses[1]", q("a_b.example"), "expected"),
		a("DNS name with leading dash", "not a DNS-1123 subdomain", []v1.NodeAddress{good, {Type: v1.NodeExternalDNS, Address: "-a.example"}}, none, "addresses[1]", q("-a.example"), "expected"),
		a("hostname too long", "a 300-character hostname", []v1.NodeAddress{good, {Type: v1.NodeHostName, Address: strings.Repeat("a", 300)}}, none, "addresses[1]", q(strings.Repeat("a", 300)), "expected"),
		a("no InternalIP", "only an ExternalIP", []v1.NodeAddress{{Type: v1.NodeExternalIP, Address: "203.0.113.1"}}, none, "InternalIP", "", "expected at least one of type InternalIP"),
		a("no addresses", "an empty list", nil, none, "InternalIP", "", "expected at least one of type InternalIP"),
		a("dual stack missing IPv6", "RequireDualStack with IPv4 only", []v1.NodeAddress{good}, instances.AddressPolicy{RequireDualStack: true}, "IPv6 InternalIP", "", "dual-stack is required"),
		a("provided node IP word", "the kubelet's annotation is not an IP", []v1.NodeAddress{good}, instances.AddressPolicy{ProvidedNodeIP: "nope"},
			"provided-node-ip", q("nope"), "expected"),
		a("provided node IP absent", "the kubelet's --node-ip is no address of the node", []v1.NodeAddress{good}, instances.AddressPolicy{ProvidedNodeIP: "10.0.0.9"},
			"provided-node-ip", q("10.0.0.9"), "expected"),
	}
	return append(cases, a("address 1 MiB", "a huge address is quoted cut", []v1.NodeAddress{good, internal(strings.Repeat("1", huge))}, none,
		"addresses[1]", q(strings.Repeat("1", huge)), "expected"))
}

// instanceInputs: Nodes with malformed provider IDs given to the fake's
// InstancesV2 (InstanceExists, InstanceShutdown, InstanceMetadata): each
// is an error, never "gone" (which would delete the Node) and never a
// look-up by something else.
func instanceInputs(w *badWorld) []badInput {
	base := w.nodes[0]
	var out []badInput
	for _, id := range []struct{ name, providerID, expect string }{
		{"traversal", "fake://../i-1", "expected a name"},
		{"query", "fake://i-1?x=1", "expected none"},
		{"escaped slash", "fake://a%2Fi-1", "expected the characters themselves"},
		{"zero-width space", "fake://i-\u200b1", "expected visible characters"},
		{"right-to-left override", "fake://i-\u202e1", "expected visible characters"},
		{"foreign scheme", "aws://i-1", `expected "fake"`},
		{"scheme only", "fake://", "expected an instance ID"},
		{"huge", "fake://" + strings.Repeat("i", 10000) + "#", "expected none"},
	} {
		node := base.DeepCopy()
		node.Spec.ProviderID = id.providerID
		for _, m := range []struct {
			name string
			call func(ctx context.Context) error
		}{
			{"InstanceExists", existsCall(w.nodesAPI, node)},
			{"InstanceShutdown", func(ctx context.Context) error { _, err := w.nodesAPI.InstanceShutdown(ctx, node); return err }},
			{"InstanceMetadata", func(ctx context.Context) error { _, err := w.nodesAPI.InstanceMetadata(ctx, node); return err }},
		} {
			if m.name != "InstanceExists" && id.name != "traversal" && id.name != "huge" {
				continue // every ID through InstanceExists, two through all three
			}
			out = append(out, badInput{surface: "instances", name: m.name + "/" + id.name,
				reason: fmt.Sprintf("%s of a Node whose spec.providerID is %s", m.name, q(id.providerID)),
				call:   m.call, state: func() any { return []any{w.cloud.Snapshot(), node.DeepCopy()} },
				field: "provider ID", value: q(id.providerID), expect: id.expect})
		}
	}
	nilNode := badInput{surface: "instances", name: "InstanceExists/nil Node", reason: "a nil Node: an error, not a panic",
		call: existsCall(w.nodesAPI, nil), field: "node", expect: "expected"}
	return append(out, nilNode)
}

// existsCall calls api.InstanceExists for node: (false, nil), which would
// make the node-lifecycle controller delete the Node, is a wrong outcome.
func existsCall(api cloudprovider.InstancesV2, node *v1.Node) func(context.Context) error {
	return func(ctx context.Context) error {
		ok, err := api.InstanceExists(ctx, node)
		if err == nil && !ok {
			return fmt.Errorf("%w: (false, nil): the Node would be deleted", errWrongOutcome)
		}
		return err
	}
}

// routeInputs: routes given to the fake's route table (a routes.Table over
// the fake's whole-table driver) by CreateRoute and DeleteRoute, as the
// route controller would pass them if a Node's podCIDR or name were
// hostile. The world's route must stay the only one.
func routeInputs(w *badWorld) []badInput {
	create := func(name, reason, hint string, route *cloudprovider.Route, field, value, expect string) badInput {
		return badInput{surface: "routes", name: name, reason: reason,
			call: func(ctx context.Context) error {
				return w.routesAPI.CreateRoute(ctx, "kubernetes", hint, route)
			}, field: field, value: value, expect: expect}
	}
	cidr := func(name, c string, expect string) badInput {
		return create(name, "DestinationCIDR "+strconv.Quote(c), "uid-node-2",
			&cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: c}, "route.DestinationCIDR", q(c), expect)
	}
	target := func(name, reason, node string, addrs []v1.NodeAddress, field, value, expect string) badInput {
		return create(name, reason, "uid-node-2",
			&cloudprovider.Route{TargetNode: types.NodeName(node), TargetNodeAddresses: addrs, DestinationCIDR: "10.244.2.0/24"}, field, value, expect)
	}
	const dest = "route.destinationCIDR"
	v6 := "fd00:10:244:2::/64"
	return []badInput{
		create("nil route", "CreateRoute(nil)", "uid-node-2", nil, "route", "", "expected a route"),
		cidr("empty CIDR", "", "expected a CIDR"),
		cidr("word", "nope", "expected a CIDR"),
		cidr("prefix too long", "10.244.2.0/33", "expected a CIDR"),
		cidr("no prefix length", "10.244.2.0", "expected a CIDR"),
		cidr("trailing space", "10.244.2.0/24 ", "expected a CIDR"),
		cidr("leading zeros", "10.244.02.0/24", "expected a CIDR"),
		cidr("zone", "fe80::%eth0/64", "expected a CIDR"),
		create("default route", "0.0.0.0/0 as a pod route sends every packet to one node", "uid-node-2",
			&cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: "0.0.0.0/0"}, dest, q("0.0.0.0/0"), "expected a pod CIDR"),
		create("IPv6 default route", "::/0 as a pod route", "uid-node-2",
			&cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: "::/0"}, dest, q("::/0"), "expected a pod CIDR"),
		create("host bits", "10.244.2.1/24: ListRoutes must return it byte-identical, and it is no network", "uid-node-2",
			&cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: "10.244.2.1/24"}, dest, q("10.244.2.1/24"), "expected the network address 10.244.2.0/24"),
		create("IPv4-mapped IPv6", "::ffff:10.244.3.0/120 is 10.244.3.0/24 spelled another way", "uid-node-2",
			&cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: "::ffff:10.244.3.0/120"}, dest, q("::ffff:10.244.3.0/120"), "expected an IPv4 CIDR in dotted form"),
		create("containing another route", "10.244.0.0/16 holds node-1's 10.244.1.0/24", "uid-node-2",
			&cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: "10.244.0.0/16"}, dest, q("10.244.0.0/16"), "expected"),
		create("inside another route", "10.244.1.128/25 lies in node-1's 10.244.1.0/24", "uid-node-2",
			&cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: "10.244.1.128/25"}, dest, q("10.244.1.128/25"), "expected"),
		withCalls(create("another node's destination", "node-1's 10.244.1.0/24 for node-2: routes.Table refuses it (ErrCIDRInUse) from the table it reads, before any write",
			"uid-node-2", &cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: "10.244.1.0/24"},
			"route.DestinationCIDR", q("10.244.1.0/24"), "expected a destination no other route has"),
			map[fake.Op]int64{fake.OpReadRouteTable: 1}),
		target("node name with slash", "a Node name cannot hold '/'", "a/b", nil, "route.targetNode", q("a/b"), "expected a Node name"),
		target("node name with NUL", "a NUL byte", "node\x00", nil, "route.targetNode", q("node\x00"), "expected a Node name"),
		target("node name 10 kB", "a huge name is quoted cut", strings.Repeat("n", 10000), nil, "route.targetNode", q(strings.Repeat("n", 10000)), "expected a Node name"),
		target("node name upper case", "Node names are lower case", "Node-2", nil, "route.targetNode", q("Node-2"), "expected a Node name"),
		target("target address word", "an InternalIP that is no address", "node-2",
			[]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "nope"}}, "route.targetNodeAddresses[0].address", q("nope"), "expected"),
		target("target address IPv4-mapped", "::ffff:10.0.0.2 is 10.0.0.2 spelled another way", "node-2",
			[]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "::ffff:10.0.0.2"}}, "route.targetNodeAddresses[0].address", q("::ffff:10.0.0.2"), "expected"),
		target("target address type", "an address type that does not exist", "node-2",
			[]v1.NodeAddress{{Type: "Bogus", Address: "10.0.0.2"}}, "route.targetNodeAddresses[0].type", q("Bogus"), "supported values"),
		target("target hostname", "a Hostname that is no DNS name", "node-2",
			[]v1.NodeAddress{{Type: v1.NodeHostName, Address: "a_b"}}, "route.targetNodeAddresses[0].address", q("a_b"), "expected a DNS-1123 subdomain"),
		target("target address 1 MiB", "a huge address is quoted cut", "node-2",
			[]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: strings.Repeat("1", huge)}}, "route.targetNodeAddresses[0].address", q(strings.Repeat("1", huge)), "expected"),
		create("empty target node", "a route to no node", "uid-node-2",
			&cloudprovider.Route{DestinationCIDR: "10.244.2.0/24"}, "route.TargetNode", "", "expected a node name"),
		create("empty name hint", "no node UID to name the route after", "",
			&cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: "10.244.2.0/24"}, "nameHint", "", "expected the node UID"),
		{surface: "routes", name: "IPv6 on an IPv4-only table", reason: "routes.ipv4Only: true and an IPv6 podCIDR",
			call: func(ctx context.Context) error {
				return w.v4Routes.CreateRoute(ctx, "kubernetes", "uid-node-2", &cloudprovider.Route{TargetNode: "node-2", DestinationCIDR: v6})
			},
			state: func() any { return w.v4only.Snapshot() }, field: "route.DestinationCIDR", value: q(v6), expect: "expected IPv4"},
		{surface: "routes", name: "delete nil route", reason: "DeleteRoute(nil)",
			call:  func(ctx context.Context) error { return w.routesAPI.DeleteRoute(ctx, "kubernetes", nil) },
			field: "route", expect: "expected a route"},
		cidr("CIDR 1 MiB", "10.244.2.0/24"+strings.Repeat("0", huge), "expected a CIDR"),
	}
}

// fakeConfigInputs: fake.Config values given to fake.New, each with a
// state file in a directory of its own: a refused config builds no Cloud
// and creates nothing there.
func fakeConfigInputs(w *badWorld) []badInput {
	n := 0
	f := func(name, reason string, cfg fake.Config, field, value, expect string) badInput {
		n++
		dir := filepath.Join(w.dir, fmt.Sprintf("config-%d", n))
		if err := os.Mkdir(dir, 0o755); err != nil {
			panic(err)
		}
		if cfg.StateFile == "" {
			cfg.StateFile = filepath.Join(dir, "state.json")
		}
		return badInput{surface: "fakeConfig", name: name, reason: reason,
			call: func(context.Context) error {
				c, err := openFake(cfg, fake.Options{})
				if c != nil {
					c.Shutdown()
					return fmt.Errorf("%w: a Cloud was built: %v", errWrongOutcome, err) //nolint:errorlint // err is nil when it was built: %v prints <nil> where %w would print %!w(<nil>)
				}
				return err
			},
			state: func() any { return dirState(dir) },
			field: field, value: value, expect: expect}
	}
	inst := func(in fake.Instance) fake.Config {
		return fake.Config{Instances: []fake.Instance{{Name: "ok", ID: "i-ok"}, in}}
	}
	id := func(name, value string) badInput {
		return f("instance ID "+name, "an instance ID that is not one segment of a provider ID and a URL path",
			inst(fake.Instance{Name: "n", ID: value}), "instances[1].id", q(value), "expected")
	}
	long := strings.Repeat("n", 10000)
	cases := []badInput{
		id("dot", "."),
		id("dot-dot", ".."),
		id("slash", "a/b"),
		id("escaped slash", "a%2Fb"),
		id("query", "i?x=1"),
		id("zero-width space", "i-\u200b1"),
		id("right-to-left override", "i-\u202e1"),
		f("instance ID too long", "200 bytes: more than an ID may have",
			inst(fake.Instance{Name: "n", ID: strings.Repeat("i", 200)}), "instance.id", q(strings.Repeat("i", 200)), "expected at most 128 bytes"),
		f("duplicate instance ID", "two instances with ID i-ok",
			inst(fake.Instance{Name: "other", ID: "i-ok"}), "instances[1].id", q("i-ok"), "Duplicate value"),
		f("instance name not DNS", "a Node name with an underscore",
			inst(fake.Instance{Name: "Node_A"}), "instances[1].name", q("Node_A"), "expected a DNS-1123 subdomain"),
		f("duplicate instance name", "two running instances named ok: which one is the Node?",
			inst(fake.Instance{Name: "ok"}), "instances[1].name", q("ok"), "expected"),
		f("duplicate instance address", "two instances with 10.0.0.9",
			fake.Config{Instances: []fake.Instance{{Name: "a", InternalIPs: []string{"10.0.0.9"}}, {Name: "b", ExternalIPs: []string{"10.0.0.9"}}}},
			"instances[1].externalIPs[0]", q("10.0.0.9"), "expected"),
		f("instance without name", "the name is required",
			inst(fake.Instance{ID: "i-2"}), "instances[1].name", "", "expected the name of the Node"),
		f("instance IP", "10.0.0.256", inst(fake.Instance{Name: "n", InternalIPs: []string{"10.0.0.256"}}),
			"instances[1].internalIPs[0]", q("10.0.0.256"), "expected an IPv4 or IPv6 address"),
		f("instance IPv4-mapped IP", "::ffff:10.0.0.9: the fake keeps one spelling per address",
			inst(fake.Instance{Name: "n", InternalIPs: []string{"::ffff:10.0.0.9"}}), "instances[1].internalIPs[0]", q("::ffff:10.0.0.9"), "expected an IPv4 address in dotted form (10.0.0.9)"),
		f("instance multicast IP", "224.0.0.1", inst(fake.Instance{Name: "n", ExternalIPs: []string{"224.0.0.1"}}),
			"instances[1].externalIPs[0]", q("224.0.0.1"), "expected a unicast address"),
		f("instance state", "exploded", inst(fake.Instance{Name: "n", State: instances.State(7)}),
			"instances[1].state", "7", "supported values"),
		f("instance label key", "a label key with a space",
			inst(fake.Instance{Name: "n", Labels: map[string]string{"bad key": "v"}}), "instances[1].labels[bad key]", q("bad key"), "expected a qualified name"),
		f("instance kubernetes.io label", "the node controller discards it",
			inst(fake.Instance{Name: "n", Labels: map[string]string{"node.kubernetes.io/x": "v"}}), "instances[1].labels", q("node.kubernetes.io/x"), "expected a key outside the kubernetes.io and k8s.io namespaces"),
		f("instance zone", "a zone that is no label value",
			inst(fake.Instance{Name: "n", Zone: "zone a"}), "instances[1].zone", q("zone a"), "expected a valid label value"),
		f("instanceCIDRs word", "not a CIDR", fake.Config{InstanceCIDRs: []string{"nope"}}, "instanceCIDRs[0]", q("nope"), "expected a CIDR"),
		f("instanceCIDRs host bits", "10.0.0.1/16", fake.Config{InstanceCIDRs: []string{"10.0.0.1/16"}}, "instanceCIDRs[0]", q("10.0.0.1/16"), "expected the network address"),
		f("instanceCIDRs two IPv4", "two networks of one family",
			fake.Config{InstanceCIDRs: []string{"10.0.0.0/16", "10.1.0.0/16"}}, "instanceCIDRs", "10.1.0.0/16", "expected at most one IPv4 and one IPv6 CIDR"),
		f("ipv4Pool of IPv6", "the IPv4 pool is an IPv6 network",
			fake.Config{LoadBalancers: fake.LoadBalancerSection{IPv4Pool: "2001:db8::/64"}}, "loadBalancers.ipv4Pool", q("2001:db8::/64"), "expected a CIDR of the pool's IP family"),
		f("hostnameSuffix", "not a DNS subdomain",
			fake.Config{LoadBalancers: fake.LoadBalancerSection{HostnameSuffix: "Bad_Suffix"}}, "loadBalancers.hostnameSuffix", q("Bad_Suffix"), "expected a DNS-1123 subdomain"),
		f("ipMode", "neither VIP nor Proxy",
			fake.Config{LoadBalancers: fake.LoadBalancerSection{IPMode: "Bogus"}}, "loadBalancers.ipMode", q("Bogus"), "supported values"),
		f("backends", "an unknown backend mode",
			fake.Config{LoadBalancers: fake.LoadBalancerSection{Backends: "bogus"}}, "loadBalancers.backends", q("bogus"), "supported values"),
		f("negative provisioningDelay", "-1s",
			fake.Config{LoadBalancers: fake.LoadBalancerSection{ProvisioningDelay: &provider.Duration{Duration: -time.Second}}}, "loadBalancers.provisioningDelay", q("-1s"), "expected zero (no delay) or a positive duration"),
		f("negative rate", "-1 reads per second",
			fake.Config{RateLimit: fake.RateLimit{ReadsPerSecond: ptr.To(-1.0), Burst: 1}}, "rateLimit.readsPerSecond", "-1", "expected a positive number"),
		f("burst without rate", "a burst of nothing",
			fake.Config{RateLimit: fake.RateLimit{Burst: 5}}, "rateLimit.burst", "5", "expected readsPerSecond or writesPerSecond with a burst"),
		f("admin on every interface", "an unauthenticated endpoint on 0.0.0.0",
			fake.Config{Admin: fake.AdminSection{Address: "0.0.0.0:8089"}}, "admin.address", q("0.0.0.0:8089"), "expected a loopback address"),
		f("admin port", "port 99999",
			fake.Config{Admin: fake.AdminSection{Address: "127.0.0.1:99999"}}, "admin.address", q("127.0.0.1:99999"), "expected a number from 0 to 65535"),
		f("relative state file", "processes in other directories would not share it",
			fake.Config{StateFile: "state.json"}, "stateFile", q("state.json"), "expected the absolute path of a file"),
		f("clusterID with spaces", "an owner tag with white space",
			fake.Config{ClusterID: " c "}, "clusterID", q(" c "), "expected no leading or trailing white space"),
		f("negative cache TTL", "-1m",
			fake.Config{InstanceCacheTTL: provider.Duration{Duration: -time.Minute}}, "instanceCacheTTL", q("-1m0s"), "expected zero (the default) or a positive duration"),
	}
	return append(cases,
		f("instance name 10 kB", "a huge name is quoted cut",
			inst(fake.Instance{Name: long}), "instances[1].name", q(long), "expected a DNS-1123 subdomain"),
		f("admin address 10 kB", "a huge address is quoted cut",
			fake.Config{Admin: fake.AdminSection{Address: long + ":1"}}, "admin.address", q(long), "expected a loopback address"))
}

// dirState returns every file of dir but the state file's lock, with its
// contents: what a refused operation must leave as it was.
func dirState(dir string) map[string]string {
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		out["error"] = err.Error()
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".lock") {
			continue // the flock(2) file: no state
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			b = []byte(err.Error())
		}
		out[e.Name()] = string(b)
	}
	return out
}

// stateFileInputs: state files another process, a hand edit or a crash
// could leave, given to fake.New: each is an error wrapping
// fake.ErrStateFile that names the problem, and the file is left as it
// was (the fake never overwrites a file it cannot read).
func stateFileInputs(w *badWorld) []badInput {
	valid := validStateFile(w)
	n := 0
	s := func(name, reason string, data []byte, field, value, expect string) badInput {
		n++
		dir := filepath.Join(w.dir, fmt.Sprintf("state-%d", n))
		path := filepath.Join(dir, "state.json")
		if err := os.Mkdir(dir, 0o755); err != nil {
			panic(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			panic(err)
		}
		return badInput{surface: "stateFile", name: name, reason: reason,
			call: func(context.Context) error {
				c, err := openFake(fake.Config{StateFile: path}, fake.Options{})
				if c != nil {
					c.Shutdown()
					return fmt.Errorf("%w: a Cloud was built: %v", errWrongOutcome, err) //nolint:errorlint // err is nil when it was built: %v prints <nil> where %w would print %!w(<nil>)
				}
				if !errors.Is(err, fake.ErrStateFile) {
					return fmt.Errorf("%w: not an ErrStateFile: %w", errWrongOutcome, err)
				}
				return err
			},
			state: func() any { return dirState(dir) },
			field: field, value: value, expect: expect}
	}
	edit := func(f func(doc map[string]any)) []byte {
		var doc map[string]any
		if err := json.Unmarshal(valid, &doc); err != nil {
			panic(err)
		}
		f(doc)
		b, err := json.Marshal(doc)
		if err != nil {
			panic(err)
		}
		return b
	}
	instance := func(f func(in map[string]any)) []byte {
		return edit(func(doc map[string]any) { f(doc["instances"].([]any)[0].(map[string]any)) })
	}
	return []badInput{
		s("empty", "a file truncated to nothing", nil, "state.json", "", "expected a JSON document written by the fake"),
		s("not JSON", "a file of another program", []byte("nope"), "state.json", "", "invalid character 'o'"),
		s("truncated", "a crash mid-write (the fake renames, a hand edit may not)", valid[:len(valid)/2], "state.json", "", "unexpected EOF"),
		s("array", "a JSON array", []byte("[]"), "state.json", "", "expected a JSON object"),
		s("trailing data", "two documents", append(slices.Clone(valid), "{}"...), "state.json", "", "data after the JSON document"),
		s("format of the future", "a format this fake does not know",
			edit(func(doc map[string]any) { doc["format"] = "ccmkit.io/fake-state/v9" }), "format", q("ccmkit.io/fake-state/v9"), "expected "+strconv.Quote("ccmkit.io/fake-state/v2")),
		s("format missing", "no format at all",
			edit(func(doc map[string]any) { delete(doc, "format") }), "format", `""`, "expected "+strconv.Quote("ccmkit.io/fake-state/v2")),
		s("unknown field", "a field the format does not have",
			edit(func(doc map[string]any) { doc["password"] = plantedSecret }), `"password"`, "", "unknown field"),
		s("negative counter", "nextInstance -1",
			edit(func(doc map[string]any) { doc["nextInstance"] = -1 }), "nextInstance", "-1", "expected counters of zero or more"),
		s("instance state", "exploded",
			instance(func(in map[string]any) { in["state"] = "exploded" }), "instances[0].state", q("exploded"), "supported values"),
		s("instance ID unsafe", "a traversal as an instance ID",
			instance(func(in map[string]any) { in["id"] = ".." }), "instances[0].id", q(".."), "expected"),
		s("instance without ID", "an instance the fake cannot name",
			instance(func(in map[string]any) { delete(in, "id") }), "instances[0].id", "", "expected the instance ID"),
		s("instance IP", "an internal IP that is no address",
			instance(func(in map[string]any) { in["internalIPs"] = []string{"10.0.0.256"} }), "instances[0].internalIPs[0]", q("10.0.0.256"), "expected an IPv4 or IPv6 address"),
		s("duplicate instance", "one instance listed twice",
			edit(func(doc map[string]any) {
				doc["instances"] = append(doc["instances"].([]any), doc["instances"].([]any)[0])
			}), "instances[2].id", q("i-1"), "expected each instance ID once"),
		s("other instance CIDRs", "a file of a cloud-config with other networks",
			edit(func(doc map[string]any) { doc["cloud"].(map[string]any)["instanceCIDRs"] = []string{"10.9.0.0/16"} }), "cloud.instanceCIDRs", "10.9.0.0/16", "expected the same cloud-config in every process"),
		s("route destination word", "a route to \"nope\"",
			edit(func(doc map[string]any) {
				doc["routes"] = []any{map[string]any{"cluster": "c", "name": "r", "destinationCIDR": "nope", "targetNode": "node-1"}}
			}), "routes[0].destinationCIDR", q("nope"), "expected a CIDR"),
		s("route default", "a cluster's default route",
			edit(func(doc map[string]any) {
				doc["routes"] = []any{map[string]any{"cluster": "c", "name": "r", "destinationCIDR": "0.0.0.0/0", "targetNode": "node-1"}}
			}), "routes[0].destinationCIDR", q("0.0.0.0/0"), "expected a pod CIDR"),
		s("pool not configured", "a pool the cloud-config does not have",
			edit(func(doc map[string]any) { doc["pools"].([]any)[0].(map[string]any)["cidr"] = "10.9.0.0/16" }), "pools[0]", q("10.9.0.0/16"), "expected one of the configured pools"),
	}
}

// validStateFile returns the state file of a cloud of two instances.
func validStateFile(w *badWorld) []byte {
	path := filepath.Join(w.dir, "valid.json")
	c, err := openFake(fake.Config{StateFile: path}, fake.Options{Instances: []fake.Instance{{Name: "node-1"}, {Name: "node-2"}}})
	if err != nil {
		panic(err)
	}
	c.Shutdown()
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return b
}

// adminView is everything a request to the admin endpoint can change.
type adminView struct {
	State     fake.State
	Calls     fake.Calls
	RateLimit fake.RateLimit
	Delay     time.Duration
}

// adminViewOf returns the state function of c's admin endpoint.
func adminViewOf(c *fake.Cloud) func() any {
	return func() any {
		return adminView{State: c.Snapshot(), Calls: c.Calls(), RateLimit: c.RateLimit(), Delay: c.ProvisioningDelay()}
	}
}

// adminInputs: requests to the fake's admin endpoint (admin.Handler behind
// an httptest server on loopback) that a web page, a careless script or a
// hostile body can make. Each is refused with the status it wants and a
// {"error"} body; the planted secret rides in the Authorization and Cookie
// headers of every request; nothing of the cloud changes.
func adminInputs(w *badWorld) []badInput {
	view := adminViewOf(w.admin)
	a := func(name, reason, method, path string, header map[string]string, body string, status int, field, value, expect string) badInput {
		return badInput{surface: "admin", name: name, reason: reason,
			call: func(ctx context.Context) error {
				return adminRequest(ctx, w.adminURL, method, path, header, body, status)
			},
			state: view, field: field, value: value, expect: expect}
	}
	post := func(name, reason, path, body string, status int, field, value, expect string) badInput {
		return a(name, reason, "POST", path, nil, body, status, field, value, expect)
	}
	id := func(name, value string) badInput {
		body, _ := json.Marshal(map[string]string{"name": "evil", "id": value})
		return post("instance ID "+name, "POST /instances with an unsafe ID", "/instances", string(body), 400, "instance.id", q(value), "expected")
	}
	bigBody := `{"name": "` + strings.Repeat("x", 2<<20) + `"}`
	return []badInput{
		a("foreign Host", "DNS rebinding: a page of evil.example resolved to 127.0.0.1", "GET", "/state",
			map[string]string{"Host": "evil.example"}, "", 421, "Host", q("evil.example"), "expected a loopback address or localhost"),
		a("foreign Host on write", "the rebound page terminates an instance", "POST", "/instances/i-1/terminate",
			map[string]string{"Host": "evil.example:80"}, "", 421, "Host", q("evil.example:80"), "expected a loopback address or localhost"),
		a("foreign Origin", "a cross-origin fetch", "POST", "/instances/i-1/stop",
			map[string]string{"Origin": "http://evil.example"}, "", 403, "Origin", q("http://evil.example"), "expected none, or the endpoint's own"),
		a("null Origin", "a sandboxed frame", "POST", "/calls/reset",
			map[string]string{"Origin": "null"}, "", 403, "Origin", q("null"), "expected none, or the endpoint's own"),
		a("cross-site fetch", "Sec-Fetch-Site cross-site", "POST", "/calls/reset",
			map[string]string{"Sec-Fetch-Site": "cross-site"}, "", 403, "Sec-Fetch-Site", q("cross-site"), "expected same-origin or none"),
		a("text/plain body", "a simple POST needs no preflight", "POST", "/instances",
			map[string]string{"Content-Type": "text/plain"}, `{"name": "evil"}`, 415, "Content-Type", q("text/plain"), "expected application/json"),
		a("form body", "an HTML form", "POST", "/instances/i-1/terminate",
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "x=1", 415, "Content-Type", q("application/x-www-form-urlencoded"), "expected application/json"),
		a("no Content-Type", "a POST without body or type", "POST", "/calls/reset",
			map[string]string{"Content-Type": ""}, "", 415, "Content-Type", `""`, "expected application/json"),
		a("DELETE without Content-Type", "DELETE changes state too", "DELETE", "/instances/i-2",
			map[string]string{"Content-Type": ""}, "", 415, "Content-Type", `""`, "expected application/json on every DELETE"),
		a("other charset", "UTF-16 JSON", "PUT", "/provisioning",
			map[string]string{"Content-Type": "application/json; charset=utf-16"}, `{"delay": "9s"}`, 415, "Content-Type", q("application/json; charset=utf-16"), "expected application/json"),
		post("duplicate key", "encoding/json would take the last", "/instances", `{"name": "a", "name": "b"}`, 400, `key "name"`, "", "repeated"),
		post("duplicate nested key", "at any depth", "/instances", `{"name": "a", "labels": {"x": "1", "x": "2"}}`, 400, `key "x"`, "", "repeated"),
		post("key in other case", "encoding/json matches names case-insensitively", "/instances", `{"name": "a", "Name": "b"}`, 400, `"Name"`, "", "unknown field"),
		post("unknown field", "a field Instance does not have", "/instances", `{"name": "a", "password": "x"}`, 400, `"password"`, "", "unknown field"),
		post("trailing data", "a second JSON value", "/instances", `{"name": "a"} {"name": "b"}`, 400, "body", "", "expected"),
		post("body over 1 MiB", "a 2 MiB name", "/instances", bigBody, 413, "body", "", "larger than 1048576 bytes"),
		id("dot", "."),
		id("dot-dot", ".."),
		id("escaped slash", "a%2Fb"),
		id("slash", "a/b"),
		id("zero-width space", "i-\u200b1"),
		id("right-to-left override", "i-\u202e1"),
		id("newline", "i-1\nx"),
		post("instance bad IP", "an internal IP that is no address", "/instances", `{"name": "n", "internalIPs": ["10.0.0.256"]}`, 400,
			"instance.internalIPs[0]", q("10.0.0.256"), "expected an IPv4 or IPv6 address"),
		post("escaped slash in path", "the mux would unescape it into the ID", "/instances/a%2Fb/stop", "", 400, "path", q("/instances/a%2Fb/stop"), "expected a canonical path"),
		post("dot-dot in path", "the mux would redirect to the cleaned path", "/instances/../calls/reset", "", 400, "path", q("/instances/../calls/reset"), "expected a canonical path"),
		post("unsafe path ID", "a space in the path's ID", "/instances/i%201/stop", "", 400, "instance ID", q("i 1"), "expected no"),
		post("unknown action", "an action the endpoint does not have", "/instances/i-1/explode", "", 404, "action", q("explode"), "expected stop, start or terminate"),
		post("fault op", "an operation that does not exist", "/faults", `{"op": "Explode", "times": 1}`, 400, "op", q("Explode"), "expected"),
		post("fault times", "zero failing calls", "/faults", `{"op": "ListInstances", "times": -2}`, 400, "times", "-2", "expected"),
		post("fault retryAfter", "not a duration", "/faults", `{"op": "ListInstances", "times": 1, "retryAfter": "soon"}`, 400, "retryAfter", q("soon"), "expected"),
		a("negative rate", "PUT /ratelimit with -1 reads per second", "PUT", "/ratelimit", nil, `{"readsPerSecond": -1, "burst": 1}`, 400,
			"readsPerSecond", "-1", "expected a positive number"),
		a("negative delay", "PUT /provisioning -1s", "PUT", "/provisioning", nil, `{"delay": "-1s"}`, 400, "delay", "-1s", "expected"),
		a("delay not a duration", "PUT /provisioning soon", "PUT", "/provisioning", nil, `{"delay": "soon"}`, 400, "delay", q("soon"), "expected"),
	}
}

// adminRequest sends one request to the admin endpoint at base, with the
// planted secret in its Authorization and Cookie headers and a JSON
// Content-Type unless header says otherwise ("" removes it; "Host" sets
// the Host header), and returns its {"error"} message, or an error
// wrapping errWrongOutcome when the status is not status or the body is
// not {"error": "..."}.
func adminRequest(ctx context.Context, base, method, path string, header map[string]string, body string, status int) error {
	req, err := http.NewRequestWithContext(ctx, method, base, strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %w", errWrongOutcome, err)
	}
	req.URL.Opaque = path // sent as is, not cleaned or escaped
	req.Header.Set("Authorization", "Bearer "+plantedSecret)
	req.Header.Set("Cookie", "session="+plantedSecret)
	if method != "GET" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		switch {
		case k == "Host":
			req.Host = v
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", errWrongOutcome, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%w: reading the response: %w", errWrongOutcome, err)
	}
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(raw, &e); err != nil || e.Error == "" {
		return fmt.Errorf("%w: %s %s = %d %q; want %d {\"error\": ...}", errWrongOutcome, method, path, resp.StatusCode, raw, status)
	}
	if resp.StatusCode != status {
		return fmt.Errorf("%w: %s %s = %d; want %d: %s", errWrongOutcome, method, path, resp.StatusCode, status, e.Error)
	}
	return errors.New(e.Error)
}

// lockInputs: cloud API calls of a fake over a state file whose lock
// another Cloud holds (its Options.Clock clock blocks while it reads the
// state): each call has its own short deadline and must give up by it
// with an error wrapping context.DeadlineExceeded that names the lock
// (fake.ErrStateFile), having changed nothing, well before the case's
// deadline.
func lockInputs(w *badWorld) []badInput {
	dir := filepath.Join(w.dir, "lock")
	if err := os.Mkdir(dir, 0o755); err != nil {
		panic(err)
	}
	cfg := fake.Config{ClusterID: badCluster, StateFile: filepath.Join(dir, "state.json"),
		Instances: []fake.Instance{{Name: "node-1"}, {Name: "node-2"}}}
	a, err := openFake(cfg, fake.Options{})
	if err != nil {
		panic(err)
	}
	var hold atomic.Pointer[chan struct{}] // set: the holder's clock blocks until it is closed
	entered := make(chan struct{}, 1)
	holder, err := openFake(cfg, fake.Options{Clock: holdingClock{hold: &hold, entered: entered}})
	if err != nil {
		panic(err)
	}
	w.closers = append(w.closers, a.Shutdown, holder.Shutdown)
	lbs, _ := a.LoadBalancer()
	nodesAPI, _ := a.InstancesV2()
	routesAPI, _ := a.Routes()
	node, err := a.NodeFor("i-1")
	if err != nil {
		panic(err)
	}
	// held runs call while holder holds the lock, with a deadline of its
	// own far shorter than the case's (none for an admin request: the
	// server below gives each request that deadline).
	held := func(call func(ctx context.Context) error, own bool) func(context.Context) error {
		return func(ctx context.Context) error {
			release := make(chan struct{})
			var once sync.Once
			free := func() { once.Do(func() { hold.Store(nil); close(release) }) }
			defer context.AfterFunc(ctx, free)() // a call that ignores its deadline still ends the hold
			hold.Store(&release)
			done := make(chan struct{})
			go func() { defer close(done); holder.Snapshot() }()
			<-entered // the holder has the lock
			cctx, cancel := ctx, context.CancelFunc(func() {})
			if own {
				cctx, cancel = context.WithTimeout(ctx, lockWait)
			}
			err := call(cctx)
			cancel()
			free()
			<-done
			if own && err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("%w: not context.DeadlineExceeded: %w", errWrongOutcome, err)
			}
			return err
		}
	}
	svc := webService(nil)
	l := func(name string, call func(ctx context.Context) error) badInput {
		return badInput{surface: "lock", name: name, reason: name + " while another Cloud holds the state file's lock",
			call: held(call, true), state: func() any { return []any{a.Snapshot(), svc.DeepCopy(), node.DeepCopy()} },
			field: "state.json.lock", expect: "which another process or Cloud holds"}
	}
	// The admin endpoint of a, served as a user serves admin.Handler
	// elsewhere, under a request deadline of lockWait (the endpoint's own
	// is 20s): a request that cannot take the lock by then is a 503.
	adminH := admin.Handler(a)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), lockWait)
		defer cancel()
		adminH.ServeHTTP(rw, r.WithContext(ctx))
	}))
	w.closers = append(w.closers, srv.Close)
	admin := func(method, path, body string) badInput {
		return badInput{surface: "lock", name: "admin " + method + " " + path, reason: method + " " + path + " while another Cloud holds the state file's lock",
			call: held(func(ctx context.Context) error {
				return adminRequest(ctx, srv.URL, method, path, nil, body, http.StatusServiceUnavailable)
			}, false),
			state: adminViewOf(a),
			field: "state.json.lock", expect: "which another process or Cloud holds"}
	}
	route := &cloudprovider.Route{TargetNode: "node-1", DestinationCIDR: "10.244.1.0/24"}
	return []badInput{
		l("EnsureLoadBalancer", func(ctx context.Context) error {
			_, err := lbs.EnsureLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{node})
			return err
		}),
		l("UpdateLoadBalancer", func(ctx context.Context) error {
			return lbs.UpdateLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{node})
		}),
		l("GetLoadBalancer", func(ctx context.Context) error {
			_, _, err := lbs.GetLoadBalancer(ctx, "kubernetes", svc)
			return err
		}),
		l("EnsureLoadBalancerDeleted", func(ctx context.Context) error {
			return lbs.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc)
		}),
		l("InstanceExists", existsCall(nodesAPI, node)),
		l("InstanceMetadata", func(ctx context.Context) error {
			_, err := nodesAPI.InstanceMetadata(ctx, node)
			return err
		}),
		admin("GET", "/state", ""),
		admin("POST", "/instances/i-1/stop", ""),
		admin("POST", "/instances", `{"name": "node-9"}`),
		admin("DELETE", "/instances/i-2", ""),
		l("CreateRoute", func(ctx context.Context) error {
			return routesAPI.CreateRoute(ctx, "kubernetes", "uid-node-1", route)
		}),
		l("ListRoutes", func(ctx context.Context) error {
			_, err := routesAPI.ListRoutes(ctx, "kubernetes")
			return err
		}),
	}
}

// holdingClock is the real clock, except that reading it blocks while hold
// is set, after saying so on entered: the fake reads its clock with its
// state-file lock held, so a case can run a call while another process
// holds the lock.
type holdingClock struct {
	clock.RealClock
	hold    *atomic.Pointer[chan struct{}]
	entered chan<- struct{}
}

// Now blocks while c.hold is set, then returns the real time.
func (c holdingClock) Now() time.Time {
	if ch := c.hold.Load(); ch != nil {
		c.entered <- struct{}{}
		<-*ch
	}
	return time.Now()
}

// instantClock is a fake clock on which a wait ends at once: starting one
// steps the clock past it. The time it reports still moves only by waits
// and by Step, so a case's deadlines and Retry-After delays keep their
// meaning without a call waiting in real time.
type instantClock struct{ *clocktesting.FakeClock }

// NewTimer returns a timer of d that has fired: the clock is stepped by d.
func (c instantClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.Step(d)
	return t
}

// After returns a channel that has received: the clock is stepped by d.
func (c instantClock) After(d time.Duration) <-chan time.Time {
	ch := c.FakeClock.After(d)
	c.Step(d)
	return ch
}

// Sleep steps the clock by d.
func (c instantClock) Sleep(d time.Duration) { c.Step(d) }

// openFake is fake.New over the state file cfg.StateFile (statefile.Open)
// when it is set, as the registered provider builds the fake: after the
// cloud-config is validated (provider.Register validates it first), so an
// invalid one creates no lock file.
func openFake(cfg fake.Config, opts fake.Options) (*fake.Cloud, error) {
	if cfg.StateFile != "" && opts.Persistence == nil && cfg.Validate() == nil {
		f, err := statefile.Open(cfg.StateFile)
		if err != nil {
			return nil, err
		}
		opts.Persistence = f
	}
	return fake.New(cfg, opts)
}
