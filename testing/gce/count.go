package gce

import (
	"reflect"
	"strings"

	"github.com/ccmkit/ccmkit/testing/conformance"
)

// The GCE compute mock (github.com/GoogleCloudPlatform/k8s-cloud-provider
// pkg/cloud, gen.go) gives every method of every resource a func field
// named "<Method>Hook" (InsertHook, DeleteHook, AddInstanceHook…) that the
// generated method calls first when it is set. Every one of them returns an
// error last; the standard methods' hooks also return an "intercept" bool
// first (and Get and List the object), and the mock goes on with its normal
// behaviour when it is false. The helpers below wrap those fields
// generically, by reflection, so that no resource has to be listed by hand.

// meterHooks wraps every "<Method>Hook" func field of structs (pointers to
// mock structs, such as *cloud.MockTargetPools) so that each call goes
// through m first (conformance.Meter.Call, a write when isMutation says
// so): during an outage the hook returns m's error without reaching the
// mock (and true for an interceptor's bool, zero values otherwise), and
// otherwise it calls the hook it replaces, or, where there was none,
// returns zero values ((false, nil) for an interceptor, nil for the
// others), so that the mock behaves as before. Wrap after setting the
// hooks that give the mock its state.
func meterHooks(m *conformance.Meter, structs ...any) {
	wrapHooks(structs, func(method string, orig reflect.Value, args []reflect.Value) []reflect.Value {
		err := m.Call(method, isMutation(method))
		if err == nil {
			return callOrZero(orig, args)
		}
		t := orig.Type()
		out := zeros(t)
		for i := range out {
			switch {
			case i == len(out)-1:
				out[i] = reflect.ValueOf(&err).Elem() // an error interface value
			case t.Out(i).Kind() == reflect.Bool:
				out[i] = reflect.ValueOf(true)
			}
		}
		return out
	})
}

// hookFields returns how many "<Method>Hook" func fields of structs have a
// Method that satisfies match.
func hookFields(match func(method string) bool, structs ...any) int {
	n := 0
	eachHook(structs, func(method string, _ reflect.Value) {
		if match(method) {
			n++
		}
	})
	return n
}

// isMutation reports whether a mock method changes the cloud: the
// prefixes of every mutating method of the compute API (Insert, Delete,
// Update, Patch, Set…, Add…, Remove…, Attach…, Detach…, Resize,
// Create…, Clone…).
func isMutation(method string) bool {
	for _, p := range mutatingPrefixes {
		if strings.HasPrefix(method, p) {
			return true
		}
	}
	return false
}

// mutatingPrefixes are the method-name prefixes isMutation takes for
// writes. The first seven cover every write GCE's load balancers, routes
// and instances make; the rest are writes of other resources
// (AttachDisk, AttachNetworkEndpoints, Resize, CreateInstances,
// CloneRules).
var mutatingPrefixes = []string{"Insert", "Delete", "Update", "Patch", "Set", "Add", "Remove", "Attach", "Detach", "Resize", "Create", "Clone"}

// wrapHooks replaces each "<Method>Hook" func field of structs with a
// function of the same type that calls body(method, orig, args), orig
// being the field's previous value (possibly a nil func).
func wrapHooks(structs []any, body func(method string, orig reflect.Value, args []reflect.Value) []reflect.Value) {
	eachHook(structs, func(method string, f reflect.Value) {
		orig := reflect.New(f.Type()).Elem()
		orig.Set(f)
		f.Set(reflect.MakeFunc(f.Type(), func(args []reflect.Value) []reflect.Value { return body(method, orig, args) }))
	})
}

// eachHook calls visit with the method name and the (settable) field of
// every exported func field named "<Method>Hook" of structs, each a pointer
// to a struct.
func eachHook(structs []any, visit func(method string, field reflect.Value)) {
	for _, s := range structs {
		v := reflect.ValueOf(s)
		if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
			continue
		}
		v = v.Elem()
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			method, ok := strings.CutSuffix(sf.Name, "Hook")
			if !ok || method == "" || !sf.IsExported() || sf.Type.Kind() != reflect.Func {
				continue
			}
			visit(method, v.Field(i))
		}
	}
}

// callOrZero calls orig with args, or returns the zero values of its
// results when orig is a nil func.
func callOrZero(orig reflect.Value, args []reflect.Value) []reflect.Value {
	if orig.IsNil() {
		return zeros(orig.Type())
	}
	if orig.Type().IsVariadic() {
		return orig.CallSlice(args)
	}
	return orig.Call(args)
}

// zeros returns the zero values of the results of func type t.
func zeros(t reflect.Type) []reflect.Value {
	out := make([]reflect.Value, t.NumOut())
	for i := range out {
		out[i] = reflect.Zero(t.Out(i))
	}
	return out
}
