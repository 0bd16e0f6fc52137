package admin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/ccmkit/ccmkit/fake"
)

// maxHeaderBytes bounds admin request headers.
const maxHeaderBytes = 64 << 10

// timeouts are the admin endpoint's timeouts: the server's (http.Server: a
// client that sends its headers, its body or reads the response more
// slowly, or keeps an idle connection open longer, is cut off), and
// handler, the deadline of each request's work on the cloud (waiting for
// the shared state file's lock included), shorter than write so that the
// refusal still reaches the client.
type timeouts struct{ readHeader, read, write, idle, handler time.Duration }

// defaultTimeouts are the timeouts Handler documents.
var defaultTimeouts = timeouts{readHeader: 5 * time.Second, read: 10 * time.Second, write: 30 * time.Second, idle: time.Minute, handler: 20 * time.Second}

// testTimeouts, when set, replaces defaultTimeouts for the endpoints
// started afterwards: the tests' knob for slow clients without long
// sleeps.
var testTimeouts atomic.Pointer[timeouts]

func timeoutsOf() timeouts {
	if t := testTimeouts.Load(); t != nil {
		return *t
	}
	return defaultTimeouts
}

// Options are the inputs of New: where the endpoint listens, as the
// cloud-config's admin section (fake.Config.Admin) says. The zero Options
// serves no endpoint.
type Options struct {
	// AdminSection is the loopback address to listen on (Address; empty:
	// no endpoint) and the file to write the address to (AddressFile;
	// empty: none). See fake.AdminSection.
	fake.AdminSection
}

// Cloud is a fake.Cloud that serves its admin endpoint: the fake's
// cloudprovider.Interface and control surface, whose Initialize also
// starts the endpoint on Options.Address, serving Handler until the stop
// channel closes or Shutdown is called. It is what the registered
// provider "fake" (package fake/register) builds from a cloud-config with
// admin.address. Every method is safe for concurrent use.
type Cloud struct {
	*fake.Cloud

	opts Options
	mu   sync.Mutex
	st   state // guarded by mu
	wg   sync.WaitGroup
}

var _ cloudprovider.Interface = (*Cloud)(nil)

// state is the endpoint's lifecycle.
type state struct {
	started bool
	addr    string
	err     error
}

// New returns c serving its admin endpoint as opts says, from Initialize
// on. It starts nothing itself. It returns an error naming the field for
// a nil c and for an Options.Address that is not a loopback host:port
// (which fake.Config.Validate refuses too).
func New(c *fake.Cloud, opts Options) (*Cloud, error) {
	if c == nil {
		return nil, errors.New("admin.New: cloud is nil: expected a *fake.Cloud")
	}
	if _, err := opts.ListenAddress(); err != nil {
		return nil, fmt.Errorf("admin.New: Options.Address %q: %w", opts.Address, err)
	}
	return &Cloud{Cloud: c, opts: opts}, nil
}

// Initialize implements cloudprovider.Interface: fake.Cloud's (that is,
// provider.Cloud's) Initialize, then the admin endpoint, when
// Options.Address is set, which serves until stop is closed or Shutdown is
// called. The cloud-controller-manager calls it once it leads, so the
// endpoint of a standby replica starts only when it becomes leader. Calls
// after the first do nothing. A failure to listen is logged and reported
// by the admin endpoint not answering; it does not stop the cloud.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.Cloud.Initialize(clientBuilder, stop)
	c.start(c.Cloud.Context())
}

// Shutdown stops what Initialize started, as closing its stop channel does,
// and waits for the admin endpoint's goroutines to end. It is safe to call
// more than once and before Initialize.
func (c *Cloud) Shutdown() {
	c.Cloud.Shutdown()
	c.wg.Wait()
}

// addr returns the address the admin endpoint listens on, "" when it is
// not configured or not started yet, and the error that kept it from
// listening, if any.
func (c *Cloud) addr() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.addr, c.st.err
}

// start listens on the configured loopback address and serves the admin
// API until ctx is done. The goroutines it starts are tracked by wg and
// end with ctx.
func (c *Cloud) start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.started || c.opts.Address == "" || ctx == nil {
		return
	}
	c.st.started = true
	fail := func(err error) {
		c.st.err = fmt.Errorf("fake: admin endpoint: %w", err)
		klog.ErrorS(err, "Fake cloud admin endpoint not started", "address", c.opts.Address)
	}
	addr, err := c.opts.ListenAddress()
	if err != nil {
		fail(err) // New already refused it; kept as a second guard
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fail(err)
		return
	}
	if f := c.opts.AddressFile; f != "" {
		if err := writeFileAtomic(f, ln.Addr().String()); err != nil {
			ln.Close()
			fail(err)
			return
		}
	}
	c.st.addr = ln.Addr().String()
	c.serve(ctx, ln)
	klog.InfoS("Fake cloud admin endpoint listening", "address", c.st.addr)
}

// serve serves Handler on ln until ctx is done, in goroutines tracked by
// wg.
func (c *Cloud) serve(ctx context.Context, ln net.Listener) {
	to := timeoutsOf()
	srv := &http.Server{
		Handler:           Handler(c.Cloud),
		ReadHeaderTimeout: to.readHeader,
		ReadTimeout:       to.read,
		WriteTimeout:      to.write,
		IdleTimeout:       to.idle,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	c.wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Fake cloud admin endpoint stopped", "address", ln.Addr())
		}
	})
	c.wg.Go(func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
}

// writeFileAtomic writes data to path through a temporary file and a
// rename, so a reader never sees a partial address.
func writeFileAtomic(path, data string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fake-admin-*")
	if err != nil {
		return err
	}
	_, werr := tmp.WriteString(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
