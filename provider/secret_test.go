package provider

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/davecgh/go-spew/spew"
	yamlv2 "go.yaml.in/yaml/v2"
	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/klog/v2/textlogger"
	"k8s.io/utils/dump"
	"sigs.k8s.io/yaml"
)

// secretText is the credential the printer tests hide: long enough that
// it cannot appear in an output by chance.
const secretText = "hunter2-S3CR3T-zq9x-0042"

// printers are every printer Secret's documentation names, each turning
// v into the text a reader could see. An error is a printer refusing v
// (encoding/xml cannot marshal maps, gob refuses a Secret): nothing is
// shown then, which is safe.
var printers = []struct {
	name  string
	print func(v any) (string, error)
}{
	{"encoding/json", func(v any) (string, error) { b, err := json.Marshal(v); return string(b), err }},
	{"sigs.k8s.io/yaml", func(v any) (string, error) { b, err := yaml.Marshal(v); return string(b), err }},
	{"go.yaml.in/yaml/v2", func(v any) (string, error) { b, err := yamlv2.Marshal(v); return string(b), err }},
	{"go.yaml.in/yaml/v3", func(v any) (string, error) { b, err := yamlv3.Marshal(v); return string(b), err }},
	{"encoding/xml", func(v any) (string, error) { b, err := xml.Marshal(v); return string(b), err }},
	{"encoding/gob", func(v any) (string, error) {
		var buf bytes.Buffer
		err := gob.NewEncoder(&buf).Encode(v)
		return buf.String(), err
	}},
	{"go-spew", func(v any) (string, error) { return spew.Sdump(v), nil }},
	{"go-spew DisableMethods", func(v any) (string, error) {
		return (&spew.ConfigState{DisableMethods: true, Indent: " "}).Sdump(v), nil
	}},
	{"dump.Pretty", func(v any) (string, error) { return dump.Pretty(v), nil }},
	{"slog JSON", func(v any) (string, error) {
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("m", "v", v)
		return buf.String(), nil
	}},
	{"slog text", func(v any) (string, error) {
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, nil)).Info("m", "v", v)
		return buf.String(), nil
	}},
	{"klog text", func(v any) (string, error) {
		var buf bytes.Buffer
		textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf))).Info("m", "v", v)
		return buf.String(), nil
	}},
}

// fmtFormats is every fmt verb, plain and with the flags that change what
// is printed.
var fmtFormats = func() []string {
	var out []string
	for _, verb := range "vsqxXdbcoOUeEfFgGptT" {
		for _, flags := range []string{"", "+", "#", " "} {
			out = append(out, "%"+flags+string(verb))
		}
	}
	return out
}()

// checkHidden fails t if any printer shows secretText for v.
func checkHidden(t *testing.T, what string, v any) {
	t.Helper()
	for _, f := range fmtFormats {
		if out := fmt.Sprintf(f, v); strings.Contains(out, secretText) {
			t.Fatalf("fmt %s of %s reveals the secret: %s", f, what, out)
		}
	}
	for _, p := range printers {
		out, err := p.print(v)
		if err == nil && strings.Contains(out, secretText) {
			t.Fatalf("%s of %s reveals the secret: %s", p.name, what, out)
		}
	}
}

// TestSecretPrintersByReflection pins the cases fmt and the encoders reach
// without calling a method: an unexported field, a map key, an interface
// in an unexported field, reflection-based dumpers.
func TestSecretPrintersByReflection(t *testing.T) {
	s := NewSecret(secretText)
	type inner struct{ token Secret }
	cases := map[string]any{
		"the Secret":                         s,
		"a pointer":                          &s,
		"an unexported field":                struct{ token Secret }{s},
		"a pointer to an unexported field":   &struct{ token Secret }{s},
		"an unexported interface field":      struct{ v any }{s},
		"an unexported pointer field":        struct{ p *Secret }{&s},
		"a nested unexported field":          struct{ In inner }{inner{s}},
		"a JSON map key":                     map[Secret]string{s: "v"},
		"a map key in an unexported field":   struct{ m map[Secret]int }{map[Secret]int{s: 1}},
		"a map value in an unexported field": struct{ m map[string]Secret }{map[string]Secret{"k": s}},
		"an XML attribute": struct {
			XMLName xml.Name `xml:"c"`
			Token   Secret   `xml:"token,attr"`
		}{Token: s},
	}
	for what, v := range cases {
		checkHidden(t, what, v)
	}
	if _, err := json.Marshal(map[Secret]string{s: "v"}); err != nil {
		t.Errorf("json.Marshal of a Secret map key: %v, want the redacted key", err)
	}
	if b, _ := json.Marshal(map[Secret]string{s: "v"}); string(b) != `{"[redacted]":"v"}` {
		t.Errorf("json.Marshal of a Secret map key = %s, want {\"[redacted]\":\"v\"}", b)
	}
}

func TestSecretValue(t *testing.T) {
	a, b := NewSecret(secretText), NewSecret(strings.Clone(secretText))
	if a != b || !a.Equal(b) {
		t.Errorf("two Secrets of the same text differ: they must compare equal with == and Equal")
	}
	if a == NewSecret(secretText+"x") || a.IsZero() {
		t.Errorf("Secrets of different texts compare equal, or a set Secret is zero")
	}
	if got := a.Reveal(); got != secretText {
		t.Errorf("Reveal() = %q, want %q", got, secretText)
	}
	if got := (Secret{}).Reveal(); got != "" || NewSecret("") != (Secret{}) {
		t.Errorf("the empty Secret: Reveal() = %q, NewSecret(\"\") zero = %v; want \"\", true", got, NewSecret("") == Secret{})
	}
	var u Secret
	if err := u.UnmarshalText([]byte(secretText)); err != nil || u != a {
		t.Errorf("UnmarshalText = %v; want the Secret of the text", err)
	}
	long := strings.Repeat("\x00\xff", 1<<19) // 1 MiB, grows the key stream
	if NewSecret(long).Reveal() != long {
		t.Errorf("a 1 MiB Secret does not reveal its text")
	}
}

// FuzzSecretNesting builds a value that nests a Secret as the fuzzer's
// bytes say (pointers, slices, arrays, maps by key and by value,
// interfaces, structs with exported and unexported fields) and checks
// that no printer shows its text, and that the text survives Reveal.
func FuzzSecretNesting(f *testing.F) {
	for _, seed := range []string{"", "\x00", "\x01\x02\x03", "\x06\x07\x05", "\x04\x04\x08\x01", "\x07\x06\x05\x04\x03\x02\x01"} {
		f.Add([]byte(seed), secretText)
	}
	f.Fuzz(func(t *testing.T, shape []byte, text string) {
		if len(text) < 12 || strings.ContainsAny(text, "\x00") {
			text = secretText // short texts appear in any output by chance
		}
		s := NewSecret(text)
		if s.Reveal() != text {
			t.Fatalf("Reveal() = %q, want %q", s.Reveal(), text)
		}
		if len(shape) > 8 {
			shape = shape[:8]
		}
		v := nest(reflect.ValueOf(s), shape)
		for _, f := range fmtFormats {
			if out := fmt.Sprintf(f, v.Interface()); strings.Contains(out, text) {
				t.Fatalf("fmt %s of %s reveals the secret: %s", f, v.Type(), out)
			}
		}
		for _, p := range printers {
			if out, err := p.print(v.Interface()); err == nil && strings.Contains(out, text) {
				t.Fatalf("%s of %s reveals the secret: %s", p.name, v.Type(), out)
			}
		}
	})
}

// nest wraps v once for each byte of shape, from the last byte out.
func nest(v reflect.Value, shape []byte) reflect.Value {
	for i := len(shape) - 1; i >= 0; i-- {
		v = wrap(v, shape[i]%9)
	}
	return v
}

var anyType = reflect.TypeFor[any]()

// wrap returns a value that holds v in the way kind names.
func wrap(v reflect.Value, kind byte) reflect.Value {
	t := v.Type()
	switch kind {
	case 0: // a pointer
		p := reflect.New(t)
		p.Elem().Set(v)
		return p
	case 1: // a slice
		return reflect.Append(reflect.MakeSlice(reflect.SliceOf(t), 0, 1), v)
	case 2: // an array
		a := reflect.New(reflect.ArrayOf(1, t)).Elem()
		a.Index(0).Set(v)
		return a
	case 3: // a map value
		m := reflect.MakeMap(reflect.MapOf(reflect.TypeFor[string](), t))
		m.SetMapIndex(reflect.ValueOf("k"), v)
		return m
	case 4: // a map key, when v can be one
		if !v.Comparable() {
			return wrap(v, 3)
		}
		m := reflect.MakeMap(reflect.MapOf(t, reflect.TypeFor[string]()))
		m.SetMapIndex(v, reflect.ValueOf("v"))
		return m
	case 5: // an interface
		i := reflect.New(anyType).Elem()
		i.Set(v)
		return i
	case 6: // an exported field
		return inStruct(v, reflect.StructField{Name: "Field", Type: t, Tag: `json:"field" yaml:"field" xml:"field"`})
	case 7: // an unexported field
		return inStruct(v, reflect.StructField{Name: "field", PkgPath: "github.com/ccmkit/ccmkit/provider", Type: t})
	default: // an unexported interface field
		return inStruct(v, reflect.StructField{Name: "field", PkgPath: "github.com/ccmkit/ccmkit/provider", Type: anyType})
	}
}

// inStruct returns a struct of the one field f holding v, set through
// unsafe when f is unexported (reflection cannot set it otherwise).
func inStruct(v reflect.Value, f reflect.StructField) reflect.Value {
	s := reflect.New(reflect.StructOf([]reflect.StructField{f})).Elem()
	field := s.Field(0)
	reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem().Set(v) //nolint:gosec // G103: sets an unexported field of a test struct, which reflection cannot
	return s
}
