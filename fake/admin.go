package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/ccmkit/ccmkit/provider"
)

// maxBody bounds admin request bodies.
const maxBody = 1 << 20

// adminState is the admin endpoint's lifecycle, guarded by Cloud.adminMu.
type adminState struct {
	started bool
	addr    string
	err     error
}

// AdminAddr returns the address the admin endpoint listens on, "" when it
// is not configured or not started yet, and the error that kept it from
// listening, if any.
func (c *Cloud) AdminAddr() (string, error) {
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	return c.admin.addr, c.admin.err
}

// startAdmin listens on the configured loopback address and serves the
// admin API until ctx is done. The goroutines it starts are tracked by
// adminWG and end with ctx.
func (c *Cloud) startAdmin(ctx context.Context) {
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	if c.admin.started || c.cfg.Admin.Address == "" || ctx == nil {
		return
	}
	c.admin.started = true
	fail := func(err error) {
		c.admin.err = fmt.Errorf("fake: admin endpoint: %w", err)
		klog.ErrorS(err, "Fake cloud admin endpoint not started", "address", c.cfg.Admin.Address)
	}
	addr, err := loopbackAddress(c.cfg.Admin.Address)
	if err != nil {
		fail(err) // Validate already refused it; kept as a second guard
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fail(err)
		return
	}
	if f := c.cfg.Admin.AddressFile; f != "" {
		if err := writeFileAtomic(f, ln.Addr().String()); err != nil {
			ln.Close()
			fail(err)
			return
		}
	}
	c.admin.addr = ln.Addr().String()
	srv := &http.Server{
		Handler:           c.AdminHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	c.adminWG.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Fake cloud admin endpoint stopped", "address", ln.Addr())
		}
	})
	c.adminWG.Go(func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	klog.InfoS("Fake cloud admin endpoint listening", "address", c.admin.addr)
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

// AdminHandler returns the admin API (see the package documentation) as an
// http.Handler, to serve it elsewhere than on Config.Admin.Address. It is
// safe for concurrent use.
func (c *Cloud) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	// snapshot reads the state, answering 500 when the shared state file
	// cannot be read (rather than the state last loaded).
	snapshot := func(w http.ResponseWriter) (State, bool) {
		st, err := c.State()
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
		}
		return st, err == nil
	}
	mux.Handle("/state", methods{"GET": func(w http.ResponseWriter, r *http.Request) {
		if st, ok := snapshot(w); ok {
			writeJSON(w, http.StatusOK, st)
		}
	}})
	mux.Handle("/instances", methods{
		"GET": func(w http.ResponseWriter, r *http.Request) {
			if st, ok := snapshot(w); ok {
				writeJSON(w, http.StatusOK, st.Instances)
			}
		},
		"POST": func(w http.ResponseWriter, r *http.Request) {
			var in Instance
			if !decodeBody(w, r, &in) {
				return
			}
			out, err := c.AddInstance(in)
			if err != nil {
				writeControlError(w, err)
				return
			}
			writeJSON(w, http.StatusCreated, out)
		},
	})
	mux.Handle("/instances/{id}", methods{
		"GET": func(w http.ResponseWriter, r *http.Request) {
			in, ok, err := c.store.instance(r.PathValue("id"))
			if err != nil {
				writeError(w, http.StatusInternalServerError, err.Error())
				return
			}
			if !ok {
				writeError(w, http.StatusNotFound, fmt.Sprintf("instance %q not found", r.PathValue("id")))
				return
			}
			writeJSON(w, http.StatusOK, in)
		},
		"DELETE": func(w http.ResponseWriter, r *http.Request) {
			if err := c.RemoveInstance(r.PathValue("id")); err != nil {
				writeControlError(w, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		},
	})
	actions := map[string]func(string) (Instance, error){
		"stop": c.StopInstance, "start": c.StartInstance, "terminate": c.TerminateInstance,
	}
	mux.Handle("/instances/{id}/{action}", methods{"POST": func(w http.ResponseWriter, r *http.Request) {
		act := actions[r.PathValue("action")]
		if act == nil {
			writeError(w, http.StatusNotFound, fmt.Sprintf("unknown instance action %q; expected stop, start or terminate", r.PathValue("action")))
			return
		}
		out, err := act(r.PathValue("id"))
		if err != nil {
			writeControlError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}})
	mux.Handle("/loadbalancers", methods{"GET": func(w http.ResponseWriter, r *http.Request) {
		if st, ok := snapshot(w); ok {
			writeJSON(w, http.StatusOK, st.LoadBalancers)
		}
	}})
	mux.Handle("/routes", methods{"GET": func(w http.ResponseWriter, r *http.Request) {
		st, ok := snapshot(w)
		if !ok {
			return
		}
		all := st.Routes
		if q := r.URL.Query(); q.Has("cluster") {
			all = slices.DeleteFunc(all, func(rt Route) bool { return rt.Cluster != q.Get("cluster") })
		}
		writeJSON(w, http.StatusOK, all)
	}})
	mux.Handle("/calls", methods{"GET": func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, c.Calls()) }})
	mux.Handle("/calls/reset", methods{"POST": func(w http.ResponseWriter, r *http.Request) {
		c.ResetCalls()
		w.WriteHeader(http.StatusNoContent)
	}})
	mux.Handle("/faults", methods{
		"POST": func(w http.ResponseWriter, r *http.Request) {
			var req faultRequest
			if !decodeBody(w, r, &req) {
				return
			}
			f, err := req.fault()
			if err == nil {
				err = c.InjectFault(f)
			}
			if err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
			w.WriteHeader(http.StatusNoContent)
		},
		"DELETE": func(w http.ResponseWriter, r *http.Request) {
			c.ClearFaults()
			w.WriteHeader(http.StatusNoContent)
		},
	})
	mux.Handle("/ratelimit", methods{
		"GET": func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, c.RateLimit()) },
		"PUT": func(w http.ResponseWriter, r *http.Request) {
			var req RateLimit
			if !decodeBody(w, r, &req) {
				return
			}
			if err := c.SetRateLimit(req); err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
			writeJSON(w, http.StatusOK, c.RateLimit())
		},
	})
	mux.Handle("/provisioning", methods{
		"GET": func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, provisioningBody{Delay: &provider.Duration{Duration: c.ProvisioningDelay()}})
		},
		"PUT": func(w http.ResponseWriter, r *http.Request) {
			var req provisioningBody
			if !decodeBody(w, r, &req) {
				return
			}
			err := errors.New(`delay: expected a duration such as "2s" ("0s": no delay)`)
			if req.Delay != nil {
				err = c.SetProvisioningDelay(req.Delay.Duration)
			}
			if err != nil {
				writeError(w, http.StatusBadRequest, err.Error())
				return
			}
			writeJSON(w, http.StatusOK, provisioningBody{Delay: &provider.Duration{Duration: c.ProvisioningDelay()}})
		},
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such path %q; see the fake package documentation for the admin API", r.URL.Path))
	})
	return mux
}

// provisioningBody is the body of GET and PUT /provisioning.
type provisioningBody struct {
	Delay *provider.Duration `json:"delay"`
}

// faultRequest is the body of POST /faults.
type faultRequest struct {
	Op           Op     `json:"op"`
	Times        int    `json:"times"`
	Error        string `json:"error"`
	RetryAfter   string `json:"retryAfter"`
	LostResponse bool   `json:"lostResponse"`
}

func (req faultRequest) fault() (Fault, error) {
	f := Fault{Op: req.Op, Times: req.Times, LostResponse: req.LostResponse}
	if req.Error != "" {
		f.Err = fmt.Errorf("%w: %s", ErrInjected, req.Error)
	}
	if req.RetryAfter != "" {
		d, err := time.ParseDuration(req.RetryAfter)
		if err != nil || d <= 0 {
			return Fault{}, fmt.Errorf("retryAfter %q: expected a positive Go duration such as \"5s\"", req.RetryAfter)
		}
		f.RetryAfter = d
	}
	return f, nil
}

// methods dispatches on the request method and answers 405 otherwise.
type methods map[string]http.HandlerFunc

func (m methods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := m[r.Method]; h != nil {
		h(w, r)
		return
	}
	allowed := strings.Join(slices.Sorted(maps.Keys(m)), ", ")
	w.Header().Set("Allow", allowed)
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s; expected %s", r.Method, r.URL.Path, allowed))
}

// decodeBody decodes a JSON object into v, strictly; on failure it writes
// the error response and returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q; expected application/json", ct))
			return false
		}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
	}
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		return true
	case errors.As(err, &tooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", maxBody))
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "empty body; expected a JSON object")
	default:
		writeError(w, http.StatusBadRequest, "malformed JSON body: "+err.Error())
	}
	return false
}

// writeControlError maps a control-surface error to its status.
func writeControlError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrInvalidInstance):
		status = http.StatusBadRequest
	case errors.Is(err, ErrInstanceNotFound):
		status = http.StatusNotFound
	case errors.Is(err, ErrInstanceExists), errors.Is(err, ErrInstanceTerminated), errors.Is(err, ErrPoolExhausted):
		status = http.StatusConflict
	}
	writeError(w, status, err.Error())
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
