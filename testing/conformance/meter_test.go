package conformance_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ccmkit/ccmkit/testing/conformance"
)

// A vendor SDK that takes an *http.Client gets Hooks.Writes and
// Hooks.Outage from one Meter: no write method is wrapped by hand.
func ExampleMeter_RoundTripper() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	}))
	defer api.Close()

	var meter conformance.Meter
	client := &http.Client{Transport: meter.RoundTripper(nil)} // hand this to the SDK
	var hooks conformance.Hooks
	meter.SetHooks(&hooks)

	get := func(method, path string) int {
		req, _ := http.NewRequest(method, api.URL+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	get(http.MethodGet, "/v1/loadbalancers")
	get(http.MethodPost, "/v1/loadbalancers")
	get(http.MethodPut, "/v1/loadbalancers/lb-1/members")
	restore := hooks.Outage()
	fmt.Println("during the outage:", get(http.MethodDelete, "/v1/loadbalancers/lb-1"))
	restore()
	fmt.Println("writes:", hooks.Writes())
	fmt.Println(meter.Counts()["PUT /v1/loadbalancers/lb-1/members"])
	// Output:
	// during the outage: 503
	// writes: 2
	// 1
}

// TestMeterCall: Call counts writes only, fails every call during an
// outage with Err (or ErrOutage) without counting it, and is safe for
// concurrent use.
func TestMeterCall(t *testing.T) {
	cloudDown := errors.New("googleapi: Error 503: backend unavailable")
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{{"default error", nil, conformance.ErrOutage}, {"provider's error", cloudDown, cloudDown}} {
		t.Run(tc.name, func(t *testing.T) {
			m := conformance.Meter{Err: tc.err}
			var wg sync.WaitGroup
			for range 50 {
				wg.Go(func() {
					if err := m.Call("Insert", true); err != nil {
						t.Errorf("Call(Insert) = %v, expected nil", err)
					}
					if err := m.Call("Get", false); err != nil {
						t.Errorf("Call(Get) = %v, expected nil", err)
					}
				})
			}
			wg.Wait()
			restore := m.Outage()
			for _, write := range []bool{true, false} {
				if err := m.Call("Delete", write); !errors.Is(err, tc.want) {
					t.Errorf("Call(Delete, write %v) during an outage = %v, expected %v", write, err, tc.want)
				}
			}
			restore()
			if got := m.Writes(); got != 50 {
				t.Errorf("Writes() = %d, expected 50 (reads and calls failed by the outage are not writes)", got)
			}
			if got := m.Counts(); len(got) != 1 || got["Insert"] != 50 {
				t.Errorf("Counts() = %v, expected map[Insert:50]", got)
			}
		})
	}
}

// TestMeterRoundTripper: during an outage a request never reaches the
// server and its body is closed; after it, requests pass through.
func TestMeterRoundTripper(t *testing.T) {
	var reached int
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		io.Copy(io.Discard, r.Body)
	}))
	defer api.Close()
	m := conformance.Meter{}
	client := &http.Client{Transport: m.RoundTripper(nil)}
	restore := m.Outage()
	body := &closeCounter{Reader: strings.NewReader(`{"name":"lb"}`)}
	req, _ := http.NewRequest(http.MethodPost, api.URL+"/lbs", body)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST during an outage: %v, expected a 503 response", err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(msg), "outage") {
		t.Errorf("POST during an outage = %d %q, expected 503 naming the outage", resp.StatusCode, msg)
	}
	if body.closed == 0 || reached != 0 || m.Writes() != 0 {
		t.Errorf("during an outage: body closed %d times, server reached %d times, %d writes; expected closed, 0, 0", body.closed, reached, m.Writes())
	}
	restore()
	resp, err = client.Post(api.URL+"/lbs", "application/json", strings.NewReader(`{}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST after the outage = %v, %v; expected 200", resp, err)
	}
	resp.Body.Close()
	if reached != 1 || m.Writes() != 1 {
		t.Errorf("after the outage: server reached %d times, %d writes; expected 1, 1", reached, m.Writes())
	}
}

type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }
