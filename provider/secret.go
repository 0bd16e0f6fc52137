package provider

import (
	crand "crypto/rand"
	"encoding"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"unique"
)

// Secret holds a credential: a password, a token, an API key. It decodes
// from a cloud-config like a string (a quoted or plain YAML scalar that is
// a string; a number or a boolean is refused, since YAML would have changed
// it: 0x1F reads as 31), and prints as "[redacted]" (or "" when empty) so
// a logged or wrapped configuration never reveals it. Call Reveal to use
// the value; NewSecret makes one in code. The zero Secret is empty.
//
// The value is not stored as text: a Secret holds it sealed with a random
// key of the process (kept outside the Secret), so no printer can reach
// the text through the Secret, not even one that reads fields by
// reflection. Each of these prints "[redacted]", "" or no value at all,
// tested in this package, also nested in structs (exported or unexported
// fields), pointers, slices, arrays, interfaces and maps (keys and values),
// with a fuzz test over random nestings:
//   - fmt, every verb; where fmt cannot call methods (an unexported field)
//     it prints the sealed form's address;
//   - encoding/json and sigs.k8s.io/yaml (values and map keys), encoding/xml
//     (elements and attributes), go.yaml.in/yaml/v2 and v3 (MarshalYAML);
//   - log/slog (LogValue) and klog, text and JSON;
//   - printers that bypass methods by reflection, such as go-spew with
//     DisableMethods and k8s.io/apimachinery's dump.Pretty: they print the
//     sealed bytes, not the text;
//   - encoding/gob refuses a Secret (it has no exported fields);
//   - errors built with fmt or field.Invalid of k8s.io/apimachinery.
//
// The sealing keeps the text from printers; it is not encryption against
// a reader of the process's memory. What remains unsafe is the string
// Reveal returns: print that and the credential is printed. A Secret does
// not survive a round trip through an encoder: configurations are read,
// not written, by ccmkit.
//
// Secrets compare with == by value: two Secrets of the same text are
// equal.
type Secret struct {
	sealed unique.Handle[string] // zero for the empty Secret
}

const redacted = "[redacted]"

var (
	_ fmt.Formatter            = Secret{}
	_ fmt.Stringer             = Secret{}
	_ fmt.GoStringer           = Secret{}
	_ json.Marshaler           = Secret{}
	_ slog.LogValuer           = Secret{}
	_ encoding.TextMarshaler   = Secret{}
	_ encoding.TextUnmarshaler = (*Secret)(nil)
	_ xml.Marshaler            = Secret{}
	_ xml.MarshalerAttr        = Secret{}
)

// NewSecret returns the Secret holding s.
func NewSecret(s string) Secret {
	if s == "" {
		return Secret{}
	}
	return Secret{sealed: unique.Make(string(xorKey([]byte(s))))}
}

// Reveal returns the credential itself. Do not log it.
func (s Secret) Reveal() string {
	if s.IsZero() {
		return ""
	}
	return string(xorKey([]byte(s.sealed.Value())))
}

// IsZero reports whether s is empty. encoding/json's omitzero and the YAML
// encoders' omitempty use it.
func (s Secret) IsZero() bool { return s == Secret{} }

// String returns "[redacted]", or "" for an empty Secret (so "is it set?"
// stays visible).
func (s Secret) String() string {
	if s.IsZero() {
		return ""
	}
	return redacted
}

// GoString implements fmt.GoStringer for %#v.
func (s Secret) GoString() string { return fmt.Sprintf("%q", s.String()) }

// Format implements fmt.Formatter: every verb prints the redacted form.
func (s Secret) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'q':
		fmt.Fprintf(f, "%q", s.String())
	case verb == 'v' && f.Flag('#'):
		io.WriteString(f, s.GoString())
	default:
		io.WriteString(f, s.String())
	}
}

// MarshalJSON implements json.Marshaler with the redacted form.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// LogValue implements slog.LogValuer with the redacted form.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText implements encoding.TextMarshaler with the redacted form,
// for encoders that use it (encoding/json map keys among them).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler: the text is the
// credential. It is how DecodeConfig (through encoding/json) fills a
// Secret from a string; a JSON number or boolean is refused by
// encoding/json with the field's path.
func (s *Secret) UnmarshalText(text []byte) error {
	*s = NewSecret(string(text))
	return nil
}

// MarshalXML implements xml.Marshaler with the redacted form.
func (s Secret) MarshalXML(e *xml.Encoder, start xml.StartElement) error {
	return e.EncodeElement(s.String(), start)
}

// MarshalXMLAttr implements xml.MarshalerAttr with the redacted form.
func (s Secret) MarshalXMLAttr(name xml.Name) (xml.Attr, error) {
	return xml.Attr{Name: name, Value: s.String()}, nil
}

// MarshalYAML implements the Marshaler interface of go.yaml.in/yaml/v2 and
// v3 (and gopkg.in/yaml) with the redacted form.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// key is the process's sealing key stream: random bytes, grown on demand
// from a ChaCha8 stream seeded by crypto/rand. Byte i of a Secret's text
// is sealed with byte i of the stream, so equal texts seal equally and
// Secrets compare by value.
var key struct {
	mu     sync.Mutex
	stream []byte
	gen    *rand.ChaCha8
}

// xorKey seals (or unseals) b in place with the key stream, and returns
// it.
func xorKey(b []byte) []byte {
	k := keyStream(len(b))
	for i := range b {
		b[i] ^= k[i]
	}
	return b
}

// keyStream returns the first n bytes of the key stream. The slice is
// never written again: the stream only grows past it.
func keyStream(n int) []byte {
	key.mu.Lock()
	defer key.mu.Unlock()
	if key.gen == nil {
		var seed [32]byte
		crand.Read(seed[:]) // never fails (crypto/rand.Read, Go 1.24)
		key.gen = rand.NewChaCha8(seed)
	}
	if n > len(key.stream) {
		grown := make([]byte, max(n, 2*len(key.stream), 64))
		copy(grown, key.stream)
		key.gen.Read(grown[len(key.stream):])
		key.stream = grown
	}
	return key.stream[:n:n]
}

// Equal reports whether s and o hold the same text, as s == o does; it is
// the method github.com/google/go-cmp uses to compare Secrets.
func (s Secret) Equal(o Secret) bool { return s == o }
