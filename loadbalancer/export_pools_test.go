package loadbalancer

// Test access for the listener-pool tests of package loadbalancer_test.
// Nothing here is part of the API.

// BackendID is b's key under k as a string.
func BackendID(k BackendKey, b Backend) string { return k.id(b) }

// CloneSpec returns a deep copy of s.
func CloneSpec(s Spec) Spec { return s.clone() }
