package admin

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ccmkit/ccmkit/fake"
	"github.com/ccmkit/ccmkit/fake/statefile"

	"github.com/google/go-cmp/cmp"
)

// adminView is everything a request to the admin endpoint can change: a
// refused request must leave all of it as it was.
type adminView struct {
	State     fake.State
	Calls     fake.Calls
	RateLimit fake.RateLimit
	Delay     time.Duration
}

func viewOf(c *fake.Cloud) adminView {
	return adminView{State: c.Snapshot(), Calls: c.Calls(), RateLimit: c.RateLimit(), Delay: c.ProvisioningDelay()}
}

// hostileCloud starts a fake with two running instances (i-1, i-2) and
// its admin endpoint on a free loopback port, with the server timeouts
// to (zero: the defaults), and returns it with the endpoint's address.
func hostileCloud(t *testing.T, to timeouts) (*fake.Cloud, string) {
	t.Helper()
	return adminCloud(t, fake.Config{Instances: []fake.Instance{{Name: "node-1"}, {Name: "node-2"}}}, to)
}

// adminCloud starts a fake of cfg with its admin endpoint on a free
// loopback port and the timeouts to (zero: the defaults), and returns it
// with the endpoint's address.
func adminCloud(t *testing.T, cfg fake.Config, to timeouts) (*fake.Cloud, string) {
	t.Helper()
	if to != (timeouts{}) {
		testTimeouts.Store(&to)
		t.Cleanup(func() { testTimeouts.Store(nil) })
	}
	cfg.Admin.Address = "127.0.0.1:0"
	var opts fake.Options
	if cfg.StateFile != "" {
		f, err := statefile.Open(cfg.StateFile)
		if err != nil {
			t.Fatal(err)
		}
		opts.Persistence = f
	}
	c, err := fake.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(c, Options{AdminSection: cfg.Admin})
	if err != nil {
		t.Fatal(err)
	}
	return c, InitializeAdmin(t, a)
}

// TestAdminRefusesWebPages sends the admin endpoint the requests a web page
// can make of a loopback address: simple requests (GET with the page's own
// Host after DNS rebinding; POST with a text/plain, form or multipart body,
// or none) that need no CORS preflight, and fetches that carry the page's
// Origin. Each is refused with a 4xx naming what was wrong, and changes
// nothing. The last cases are accepted: the checks do not refuse a local
// client.
func TestAdminRefusesWebPages(t *testing.T) {
	c, addr := hostileCloud(t, timeouts{})
	_, port, _ := net.SplitHostPort(addr)
	jsonCT := map[string]string{"Content-Type": "application/json"}
	with := func(h map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range h {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1] //nolint:gosec // G602: kv holds key-value pairs: every caller passes an even count
		}
		return out
	}
	tests := []struct {
		name, reason         string
		method, path, host   string // host "": the address dialled
		header               map[string]string
		body                 string
		status               int
		message              string
		accepted, changesAny bool
	}{
		{name: "rebinding", reason: "a page of evil.example whose name now resolves to 127.0.0.1 reads /state",
			method: "GET", path: "/state", host: "evil.example:" + port, status: 421, message: `Host "evil.example:` + port + `"`},
		{name: "rebinding without port", reason: "as above, on port 80 of the page",
			method: "GET", path: "/instances", host: "evil.example", status: 421, message: "Host"},
		{name: "rebinding write", reason: "the rebound page stops an instance",
			method: "POST", path: "/instances/i-1/stop", host: "evil.example:" + port, header: jsonCT, status: 421, message: "loopback"},
		{name: "other port", reason: "a loopback Host with another port is another endpoint",
			method: "GET", path: "/state", host: "127.0.0.1:1", status: 421, message: "with port " + port},
		{name: "non-loopback address", reason: "10.0.0.1 is not this endpoint",
			method: "GET", path: "/state", host: "10.0.0.1:" + port, status: 421, message: "Host"},
		{name: "loopback lookalike", reason: "a name that starts like localhost",
			method: "GET", path: "/state", host: "localhost.evil.example:" + port, status: 421, message: "Host"},
		{name: "foreign Origin on GET", reason: "a cross-origin fetch",
			method: "GET", path: "/state", header: map[string]string{"Origin": "http://evil.example"}, status: 403, message: `Origin "http://evil.example"`},
		{name: "null Origin", reason: "a sandboxed frame or a file: page",
			method: "POST", path: "/instances/i-1/terminate", header: with(jsonCT, "Origin", "null"), status: 403, message: `Origin "null"`},
		{name: "foreign Origin on POST", reason: "terminate an instance from a page",
			method: "POST", path: "/instances/i-1/terminate", header: with(jsonCT, "Origin", "http://evil.example"), status: 403, message: "Origin"},
		{name: "Origin of another loopback port", reason: "a dev server on localhost:3000 is another origin",
			method: "POST", path: "/calls/reset", header: with(jsonCT, "Origin", "http://localhost:3000"), status: 403, message: "Origin"},
		{name: "https Origin", reason: "the endpoint is http",
			method: "POST", path: "/calls/reset", header: with(jsonCT, "Origin", "https://127.0.0.1:"+port), status: 403, message: "Origin"},
		{name: "cross-site fetch metadata", reason: "a no-cors POST from another site carries Sec-Fetch-Site",
			method: "POST", path: "/instances/i-1/stop", header: with(jsonCT, "Sec-Fetch-Site", "cross-site"), status: 403, message: "Sec-Fetch-Site"},
		{name: "terminate without body", reason: "a simple POST with no body and no Content-Type",
			method: "POST", path: "/instances/i-1/terminate", status: 415, message: "expected application/json on every POST"},
		{name: "stop text/plain", reason: "a simple POST",
			method: "POST", path: "/instances/i-1/stop", header: map[string]string{"Content-Type": "text/plain"}, status: 415, message: `Content-Type "text/plain"`},
		{name: "reset without body", reason: "reset counters from a form with no fields",
			method: "POST", path: "/calls/reset", status: 415, message: "Content-Type"},
		{name: "add instance text/plain", reason: "a JSON body sent as text/plain needs no preflight",
			method: "POST", path: "/instances", header: map[string]string{"Content-Type": "text/plain;charset=UTF-8"}, body: `{"name":"evil"}`, status: 415, message: "text/plain"},
		{name: "form body", reason: "an HTML form",
			method: "POST", path: "/instances", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: `name=evil`, status: 415, message: "x-www-form-urlencoded"},
		{name: "multipart body", reason: "an HTML form with enctype multipart",
			method: "POST", path: "/faults", header: map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, body: "--x\r\nContent-Disposition: form-data; name=\"times\"\r\n\r\n-1\r\n--x--\r\n", status: 415, message: "multipart"},
		{name: "two Content-Types", reason: "one of them is not JSON",
			method: "PUT", path: "/ratelimit", header: jsonCT, body: `{}`, status: 415, message: "Content-Type"},
		{name: "other charset", reason: "the body is decoded as UTF-8",
			method: "PUT", path: "/provisioning", header: map[string]string{"Content-Type": "application/json; charset=utf-16"}, body: `{"delay": "9s"}`, status: 415, message: "utf-16"},
		{name: "DELETE without Content-Type", reason: "DELETE changes state too",
			method: "DELETE", path: "/instances/i-2", status: 415, message: "every DELETE"},
		{name: "non-empty body of an action", reason: "actions take no body",
			method: "POST", path: "/instances/i-1/stop", header: jsonCT, body: `{"force": true}`, status: 400, message: `unknown field "force"`},
		{name: "duplicate key", reason: "encoding/json would take the last",
			method: "POST", path: "/instances", header: jsonCT, body: `{"name": "a", "name": "b"}`, status: 400, message: `key "name" repeated in the body`},
		{name: "duplicate nested key", reason: "at any depth",
			method: "POST", path: "/instances", header: jsonCT, body: `{"name": "a", "labels": {"x": "1", "x": "2"}}`, status: 400, message: `key "x" repeated in the body.labels`},
		{name: "duplicate key in other case", reason: "encoding/json matches field names case-insensitively",
			method: "PUT", path: "/ratelimit", header: jsonCT, body: `{"burst": 1, "Burst": 2}`, status: 400, message: `unknown field "Burst"`},
		{name: "duplicate fault key", reason: "times once",
			method: "POST", path: "/faults", header: jsonCT, body: `{"times": 1, "times": -1}`, status: 400, message: `key "times" repeated`},
		{name: "id .", reason: "a path segment",
			method: "POST", path: "/instances", header: jsonCT, body: `{"name": "n", "id": "."}`, status: 400, message: "instance.id"},
		{name: "id ..", reason: "a path segment",
			method: "POST", path: "/instances", header: jsonCT, body: `{"name": "n", "id": ".."}`, status: 400, message: "instance.id"},
		{name: "id a%2Fb", reason: "an escaped '/'",
			method: "POST", path: "/instances", header: jsonCT, body: `{"name": "n", "id": "a%2Fb"}`, status: 400, message: "instance.id"},
		{name: "id with zero-width space", reason: "a format character",
			method: "POST", path: "/instances", header: jsonCT, body: `{"name": "n", "id": "i-\u200b1"}`, status: 400, message: "instance.id"},
		{name: "id with right-to-left override", reason: "a format character",
			method: "POST", path: "/instances", header: jsonCT, body: `{"name": "n", "id": "i-\u202e1"}`, status: 400, message: "instance.id"},
		{name: "id with query", reason: "'?' in a path",
			method: "POST", path: "/instances", header: jsonCT, body: `{"name": "n", "id": "i?x=1"}`, status: 400, message: "instance.id"},
		{name: "escaped slash in path", reason: "the mux would unescape it into the ID",
			method: "POST", path: "/instances/a%2Fb/stop", header: jsonCT, status: 400, message: "path"},
		{name: "dot-dot in path", reason: "the mux would redirect to a cleaned path",
			method: "POST", path: "/instances/../calls/reset", header: jsonCT, status: 400, message: "canonical"},
		{name: "double slash", reason: "not canonical",
			method: "POST", path: "/instances//stop", header: jsonCT, status: 400, message: "canonical"},
		{name: "space in path ID", reason: "an unsafe ID",
			method: "POST", path: "/instances/i%201/stop", header: jsonCT, status: 400, message: "instance ID"},

		{name: "local GET by name", reason: "curl http://localhost:port/state",
			method: "GET", path: "/state", host: "localhost:" + port, status: 200, accepted: true},
		{name: "local GET over IPv6 loopback name", reason: "a loopback Host",
			method: "GET", path: "/calls", host: "[::1]:" + port, status: 200, accepted: true},
		{name: "own Origin", reason: "the endpoint itself",
			method: "POST", path: "/instances/i-1/stop", header: with(jsonCT, "Origin", "http://127.0.0.1:"+port), status: 200, accepted: true, changesAny: true},
		{name: "empty object body", reason: "curl -d '{}'",
			method: "POST", path: "/instances/i-1/start", header: jsonCT, body: "{}", status: 200, accepted: true, changesAny: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := viewOf(c)
			req, err := http.NewRequestWithContext(t.Context(), tt.method, "http://"+addr, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.URL.Opaque = tt.path // sent as is, not cleaned or escaped
			if tt.host != "" {
				req.Host = tt.host
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			if tt.name == "two Content-Types" {
				req.Header.Add("Content-Type", "text/plain")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Errorf("%s %s = %d %s; want %d (%s)", tt.method, tt.path, resp.StatusCode, body, tt.status, tt.reason)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q; want application/json", ct)
			}
			if resp.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("Access-Control-Allow-Origin %q; want none", resp.Header.Get("Access-Control-Allow-Origin"))
			}
			if tt.accepted {
				return
			}
			var e struct{ Error string }
			if err := json.Unmarshal(body, &e); err != nil || !strings.Contains(e.Error, tt.message) {
				t.Errorf("error %s; want {\"error\": ...} containing %q", body, tt.message)
			}
			if diff := cmp.Diff(before, viewOf(c), CmpModel); diff != "" {
				t.Errorf("a refused %s %s changed the cloud (-before +after):\n%s", tt.method, tt.path, diff)
			}
		})
	}
}

// TestAdminTimesOutSlowClients: with short server timeouts (the test's
// knob; the defaults are minutes and seconds), a client that sends its
// headers or its body too slowly, or keeps an idle connection, is cut off
// instead of holding a connection open, and its request changes nothing.
func TestAdminTimesOutSlowClients(t *testing.T) {
	c, addr := hostileCloud(t, timeouts{readHeader: 100 * time.Millisecond, read: 200 * time.Millisecond, write: 5 * time.Second, idle: 100 * time.Millisecond})
	tests := []struct {
		name, reason string
		send         string
		// status is the status of the response before the server closes
		// the connection; 0: it closes it without one.
		status int
	}{
		{"partial headers", "the header block never ends",
			"GET /state HTTP/1.1\r\nHost: " + addr + "\r\nX-Slow: ", 0},
		{"partial body", "Content-Length promises more than is sent",
			"POST /instances HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\": \"slow\"", http.StatusRequestTimeout},
		{"no body", "Content-Length and nothing after the headers",
			"POST /instances/i-1/terminate HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n", http.StatusRequestTimeout},
		{"idle connection", "a finished request on a kept-alive connection",
			"GET /calls HTTP/1.1\r\nHost: " + addr + "\r\n\r\n", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := viewOf(c)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, tt.send); err != nil {
				t.Fatal(err)
			}
			// A bound far above the timeouts: the assertion is that the
			// server ends the connection, not how fast.
			if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
				t.Fatal(err)
			}
			rd := bufio.NewReader(conn)
			status := 0
			if tt.status != 0 {
				resp, err := http.ReadResponse(rd, nil)
				if err != nil {
					t.Fatalf("reading the response: %v; want %d (%s)", err, tt.status, tt.reason)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				status = resp.StatusCode
				if status/100 != 2 && !strings.Contains(string(body), `"error"`) {
					t.Errorf("body %s; want {\"error\": ...}", body)
				}
			}
			if status != tt.status {
				t.Errorf("status %d; want %d (%s)", status, tt.status, tt.reason)
			}
			if _, err := rd.ReadByte(); !errors.Is(err, io.EOF) {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("the server kept the connection open for 30s (%s); want it closed by its timeouts", tt.reason)
				}
				t.Errorf("after the response: %v; want the connection closed (EOF)", err)
			}
			if diff := cmp.Diff(before, viewOf(c), CmpModel); diff != "" && tt.status != http.StatusOK {
				t.Errorf("a slow request changed the cloud (-before +after):\n%s", diff)
			}
		})
	}
}

// TestAdminTimeoutsDocumented: the endpoint's timeouts are set, and are
// the values the package documentation states.
func TestAdminTimeoutsDocumented(t *testing.T) {
	want := timeouts{readHeader: 5 * time.Second, read: 10 * time.Second, write: 30 * time.Second, idle: time.Minute, handler: 20 * time.Second}
	if diff := cmp.Diff(want, defaultTimeouts, cmp.AllowUnexported(timeouts{}), CmpModel); diff != "" {
		t.Errorf("defaultTimeouts differ from the documented ones (-doc +code):\n%s", diff)
	}
	if got := timeoutsOf(); got != defaultTimeouts {
		t.Errorf("timeoutsOf() = %+v without the test knob; want the defaults %+v", got, defaultTimeouts)
	}
}
