package admin

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ccmkit/ccmkit/fake"

	"github.com/google/go-cmp/cmp"
)

// TestAdminLockDeadline: while another holder keeps the shared state
// file's lock, every admin request that works on the cloud gives up at its
// deadline (here the test's 100ms) with a 503, Retry-After and an error
// naming the lock and the deadline, changing nothing; requests that do not
// touch the cloud are answered as usual. Once the lock is free, the same
// requests succeed.
func TestAdminLockDeadline(t *testing.T) {
	to := defaultTimeouts
	to.handler = 100 * time.Millisecond
	path := filepath.Join(t.TempDir(), "cloud.json")
	c, addr := adminCloud(t, fake.Config{Instances: []fake.Instance{{Name: "node-1"}}, StateFile: path}, to)
	// A bound far above the deadline: the assertion is that a request
	// returns at all while the lock is held, not how fast.
	client := &http.Client{Timeout: 30 * time.Second}
	send := func(method, p, body string) (int, http.Header, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, "http://"+addr+p, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if method != http.MethodGet {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v; want an answer by the request's deadline", method, p, err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, data
	}
	// In the order they run once the lock is free.
	tests := []struct {
		name, reason, method, path, body string
		held, free                       int // status with the lock held, and free
	}{
		{"GET /state", "a read of the whole cloud", "GET", "/state", "", 503, 200},
		{"GET /instances", "a read", "GET", "/instances", "", 503, 200},
		{"GET /instances/{id}", "a read of one instance", "GET", "/instances/i-1", "", 503, 200},
		{"POST /instances", "a write", "POST", "/instances", `{"name": "node-2"}`, 503, 201},
		{"POST /instances/{id}/stop", "an instance action", "POST", "/instances/i-1/stop", "", 503, 200},
		{"GET /loadbalancers", "a read", "GET", "/loadbalancers", "", 503, 200},
		{"GET /backendpools", "a read", "GET", "/backendpools", "", 503, 200},
		{"GET /routes", "a read", "GET", "/routes?cluster=x", "", 503, 200},
		{"DELETE /instances/{id}", "a write", "DELETE", "/instances/i-1", "", 503, 204},
		{"GET /calls", "per process, not in the file: no wait", "GET", "/calls", "", 200, 200},
		{"PUT /ratelimit", "per process, not in the file: no wait", "PUT", "/ratelimit", `{}`, 200, 200},
	}
	before := c.Snapshot()
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	release := HoldStateLock(t, path)
	for _, tt := range tests {
		code, header, body := send(tt.method, tt.path, tt.body)
		if code != tt.held {
			t.Errorf("%s with the lock held: %d %s; want %d (%s)", tt.name, code, body, tt.held, tt.reason)
			continue
		}
		if tt.held != http.StatusServiceUnavailable {
			continue
		}
		var e struct{ Error string }
		if err := json.Unmarshal(body, &e); err != nil || !strings.Contains(e.Error, path+".lock") || !strings.Contains(e.Error, "deadline exceeded") {
			t.Errorf("%s with the lock held: body %s; want {\"error\"} naming %s.lock and the deadline", tt.name, body, path)
		}
		if got := header.Get("Retry-After"); got != "1" {
			t.Errorf("%s with the lock held: Retry-After %q; want \"1\"", tt.name, got)
		}
		if now, _ := os.ReadFile(path); string(now) != string(file) {
			t.Errorf("%s that gave up changed the state file", tt.name)
		}
	}
	release()
	if diff := cmp.Diff(before, c.Snapshot(), CmpModel); diff != "" {
		t.Errorf("requests that gave up changed the cloud (-before +after):\n%s", diff)
	}
	for _, tt := range tests {
		if code, _, body := send(tt.method, tt.path, tt.body); code != tt.free {
			t.Errorf("%s with the lock free: %d %s; want %d", tt.name, code, body, tt.free)
		}
	}
}
