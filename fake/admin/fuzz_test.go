package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ccmkit/ccmkit/fake"

	"github.com/google/go-cmp/cmp"
)

// fuzzSecret is sent in the Authorization and Cookie headers of every
// fuzzed request (as a browser sends a cookie): it must never come back.
const fuzzSecret = "S3CR3T-fuzz-7f1c"

var fuzzMethods = []string{"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"}

// FuzzAdminHandler sends arbitrary requests to the admin handler (as served
// on 127.0.0.1:8089) and checks that it never panics, never answers 5xx
// (the in-memory cloud has no internal error to report), answers every
// non-2xx with {"error": "<non-empty>"} and leaves the cloud (state, call
// counters, rate limit, provisioning delay) unchanged, and never echoes a
// header value it was not asked about (fuzzSecret).
//
//	go test ./fake -run '^$' -fuzz FuzzAdminHandler -fuzztime 60s
func FuzzAdminHandler(f *testing.F) {
	for _, s := range []struct {
		method             uint8
		path, host, origin string
		ct, body           string
	}{
		{0, "/state", "127.0.0.1:8089", "", "", ""},
		{1, "/instances", "127.0.0.1:8089", "", "application/json", `{"name": "node-x", "labels": {"a": "b"}}`},
		{1, "/instances", "127.0.0.1:8089", "", "application/json", `{"name": "a", "name": "b"}`},
		{1, "/instances", "127.0.0.1:8089", "", "application/json", `{"name": "n", "id": ".."}`},
		{1, "/instances", "localhost:8089", "http://localhost:8089", "application/json; charset=utf-8", `{"name": "n", "id": "a%2Fb"}`},
		{1, "/instances", "127.0.0.1:8089", "", "text/plain", `{"name": "evil"}`},
		{1, "/instances/i-1/stop", "127.0.0.1:8089", "", "application/json", ""},
		{1, "/instances/i-1/terminate", "evil.example:8089", "", "application/json", ""},
		{1, "/instances/i-1/terminate", "127.0.0.1:8089", "http://evil.example", "application/json", "{}"},
		{1, "/instances/a%2Fb/stop", "127.0.0.1:8089", "", "application/json", ""},
		{1, "/calls/reset", "[::1]:8089", "", "application/x-www-form-urlencoded", "a=b"},
		{1, "/faults", "127.0.0.1:8089", "", "application/json", `{"op": "FindLoadBalancers", "times": 1, "retryAfter": "5s"}`},
		{2, "/ratelimit", "127.0.0.1:8089", "", "application/json", `{"readsPerSecond": 2, "burst": 3}`},
		{2, "/provisioning", "127.0.0.1:8089", "", "application/json", `{"delay": "2s", "Delay": "3s"}`},
		{3, "/instances/i-2", "127.0.0.1:8089", "", "application/json", ""},
		{3, "/faults", "127.0.0.1:8089", "", "multipart/form-data; boundary=x", "--x--"},
		{0, "/routes?cluster=a", "127.0.0.1", "null", "", ""},
	} {
		f.Add(s.method, s.path, s.host, s.origin, s.ct, []byte(s.body))
	}
	c, err := fake.New(fake.Config{Instances: []fake.Instance{{Name: "node-1"}, {Name: "node-2"}}}, fake.Options{})
	if err != nil {
		f.Fatal(err)
	}
	h := Handler(c)
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8089}
	f.Fuzz(func(t *testing.T, method uint8, target, host, origin, ct string, body []byte) {
		for _, in := range []string{target, host, origin, ct, string(body)} {
			if strings.Contains(in, fuzzSecret) {
				t.Skip("the input holds the secret")
			}
		}
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n")))
		if err != nil {
			return // not a request line a client could send
		}
		req = req.WithContext(context.WithValue(t.Context(), http.LocalAddrContextKey, net.Addr(local)))
		req.Method = fuzzMethods[int(method)%len(fuzzMethods)]
		req.Host = host
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		req.Header.Set("Authorization", "Bearer "+fuzzSecret)
		req.Header.Set("Cookie", "session="+fuzzSecret)

		before := viewOf(c)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		status, out := w.Code, w.Body.Bytes()

		if status >= 500 {
			t.Fatalf("%s %s (Host %q, Origin %q, Content-Type %q, body %q) = %d %s; want no 5xx", req.Method, target, host, origin, ct, body, status, out)
		}
		if bytes.Contains(out, []byte(fuzzSecret)) || strings.Contains(strings.Join(flatten(w.Header()), " "), fuzzSecret) {
			t.Fatalf("the response to %s %s echoes the Authorization or Cookie header: %s", req.Method, target, out)
		}
		if status/100 == 2 {
			return
		}
		var e struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(out, &e); err != nil || e.Error == "" {
			t.Errorf("%s %s = %d %s; want {\"error\": \"<message>\"}", req.Method, target, status, out)
		}
		if diff := cmp.Diff(before, viewOf(c), CmpModel); diff != "" {
			t.Errorf("%s %s (Host %q, Origin %q, Content-Type %q, body %q) = %d but changed the cloud (-before +after):\n%s", req.Method, target, host, origin, ct, body, status, diff)
		}
	})
}

func flatten(h http.Header) []string {
	var out []string
	for k, vs := range h {
		out = append(out, k)
		out = append(out, vs...)
	}
	return out
}
