package provider

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Provider-ID errors. Parse wraps one of them in every error it returns, so
// callers branch with errors.Is.
var (
	// ErrForeignProviderID reports a provider ID that belongs to another
	// provider (its scheme is not ours). A node with such an ID is not ours:
	// InstancesV2 adapters return an error for it rather than "not found".
	ErrForeignProviderID = errors.New("provider ID has a foreign scheme")
	// ErrEmptyProviderID reports an empty provider ID, or one whose instance
	// ID part is empty ("name://").
	ErrEmptyProviderID = errors.New("provider ID is empty")
	// ErrMalformedProviderID reports a provider ID that is not of the form
	// "<scheme>://[<segment>/...]<id>".
	ErrMalformedProviderID = errors.New("provider ID is malformed")
)

// foreignSchemeError is returned by Codec.Parse for a well-formed provider ID
// whose scheme is not the codec's. It matches ErrForeignProviderID with
// errors.Is.
type foreignSchemeError struct {
	providerID string // the input as given
	scheme     string // the scheme found in providerID
	want       string // the codec's scheme
}

// Error implements error.
func (e *foreignSchemeError) Error() string {
	return fmt.Sprintf("provider ID %s: scheme %s: expected %s (the node belongs to another provider)", quote(e.providerID), quote(e.scheme), quote(e.want))
}

// Is reports whether target is ErrForeignProviderID.
func (e *foreignSchemeError) Is(target error) bool { return target == ErrForeignProviderID }

// ProviderID is a parsed provider ID: "<Scheme>://<Path[0]>/.../<ID>".
type ProviderID struct {
	// Scheme is the provider name, such as "fake".
	Scheme string
	// Path holds the optional segments between the scheme and the ID, such as
	// a region or a project. It is nil when there are none.
	Path []string
	// ID is the instance ID, the last segment. Never empty after Parse.
	ID string
}

// String returns the canonical spelling "<scheme>://<path...>/<id>".
func (p ProviderID) String() string {
	var b strings.Builder
	b.WriteString(p.Scheme)
	b.WriteString("://")
	for _, s := range p.Path {
		b.WriteString(s)
		b.WriteByte('/')
	}
	b.WriteString(p.ID)
	return b.String()
}

// Codec formats and parses the provider IDs of one provider. The zero value
// is not usable: Scheme must be set to the provider name (the name given to
// Register, which the node controller also uses as "<ProviderName()>://").
//
// Accepted spellings, for Scheme "acme":
//
//	acme://i-123             ID "i-123"
//	acme://eu-1/i-123        Path ["eu-1"], ID "i-123"
//	acme://eu-1/zone-a/i-123 Path ["eu-1" "zone-a"], ID "i-123"
//	acme:///eu-1/i-123       the same as acme://eu-1/i-123 (one empty host
//	                         segment, as some clouds write it, is ignored)
//
// Rejected: an empty string or "acme://" (ErrEmptyProviderID); a missing
// "://", an empty scheme, an empty segment ("acme://a//b"), a trailing "/",
// a "." or ".." segment (a path traversal when an ID is joined into a URL
// or a file path), '?' and '#' (a query or a fragment), '%' (a
// percent-escape, which another layer would decode to "/"), '\', and
// whitespace, control characters, Unicode format characters (unicode.Cf:
// zero-width spaces and joiners, bidirectional overrides, the byte-order
// mark) or invalid UTF-8 anywhere (ErrMalformedProviderID); a well-formed ID
// of another scheme (ErrForeignProviderID). The scheme is compared exactly,
// as the node controller compares it. Errors quote the input cut to 64
// characters.
//
// A Codec is a value and is safe for concurrent use.
type Codec struct {
	// Scheme is the provider name written before "://".
	Scheme string
}

// Format returns "<scheme>://<path...>/<id>". It returns ErrEmptyProviderID
// when id is empty and ErrMalformedProviderID when the scheme or a segment
// breaks a rule of Parse (see Codec), so that every ID it formats parses
// back to the same parts.
func (c Codec) Format(id string, path ...string) (string, error) {
	if err := checkScheme(c.Scheme); err != nil {
		return "", err
	}
	if id == "" {
		return "", fmt.Errorf("%w: instance ID is empty: expected an instance ID", ErrEmptyProviderID)
	}
	for _, s := range append(append([]string(nil), path...), id) {
		if err := checkSegment(s); err != nil {
			return "", fmt.Errorf("%w: segment %s: %w", ErrMalformedProviderID, quote(s), err)
		}
	}
	return ProviderID{Scheme: c.Scheme, Path: path, ID: id}.String(), nil
}

// Parse parses a provider ID of this codec's scheme. Errors wrap
// ErrEmptyProviderID, ErrMalformedProviderID or ErrForeignProviderID and quote the input, cut to 64 characters.
func (c Codec) Parse(providerID string) (ProviderID, error) {
	p, err := parseAny(providerID)
	if err != nil {
		return ProviderID{}, err
	}
	if p.Scheme != c.Scheme {
		return ProviderID{}, &foreignSchemeError{providerID: providerID, scheme: p.Scheme, want: c.Scheme}
	}
	return p, nil
}

// parseAny parses a provider ID of any scheme, with the rules documented on
// Codec. Errors wrap ErrEmptyProviderID or ErrMalformedProviderID and quote
// the input, cut to 64 characters.
func parseAny(providerID string) (ProviderID, error) {
	if providerID == "" {
		return ProviderID{}, fmt.Errorf("%w: expected \"<scheme>://<id>\"", ErrEmptyProviderID)
	}
	scheme, rest, ok := strings.Cut(providerID, "://")
	if !ok {
		return ProviderID{}, fmt.Errorf("%w: %s: expected \"<scheme>://<id>\"", ErrMalformedProviderID, quote(providerID))
	}
	if err := checkScheme(scheme); err != nil {
		return ProviderID{}, fmt.Errorf("%w (in %s)", err, quote(providerID))
	}
	rest = strings.TrimPrefix(rest, "/") // "scheme:///a/b": empty host segment
	if rest == "" {
		return ProviderID{}, fmt.Errorf("%w: %s: expected an instance ID after \"://\"", ErrEmptyProviderID, quote(providerID))
	}
	segs := strings.Split(rest, "/")
	for _, s := range segs {
		if err := checkSegment(s); err != nil {
			return ProviderID{}, fmt.Errorf("%w: %s: %w", ErrMalformedProviderID, quote(providerID), err)
		}
	}
	p := ProviderID{Scheme: scheme, ID: segs[len(segs)-1]}
	if len(segs) > 1 {
		p.Path = segs[:len(segs)-1]
	}
	return p, nil
}

func checkScheme(s string) error {
	if s == "" {
		return fmt.Errorf("%w: scheme is empty: expected the provider name", ErrMalformedProviderID)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == '+') { //nolint:staticcheck // QF1001: "not one of the allowed characters" reads best as one negation
			return fmt.Errorf("%w: scheme %s: character %q: expected a letter, digit, '-', '_', '.' or '+'", ErrMalformedProviderID, quote(s), r)
		}
	}
	return nil
}

// checkSegment returns why s cannot be a segment of a provider ID, saying
// what was expected.
func checkSegment(s string) error {
	switch s {
	case "":
		return errors.New("empty path segment (\"//\" or a trailing \"/\"): expected a non-empty segment")
	case ".", "..":
		return fmt.Errorf("segment %q is a relative path element: expected a name", s)
	}
	for _, r := range s {
		switch {
		case r == '/':
			return errors.New("segment contains '/': expected one segment")
		case r == '?' || r == '#':
			return fmt.Errorf("character %q starts a URL query or fragment: expected none", r)
		case r == '%':
			return errors.New("character '%' starts a percent-escape: expected the characters themselves, unescaped")
		case r == '\\':
			return errors.New("character '\\' is a path separator: expected none")
		case unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar:
			return fmt.Errorf("character %q is whitespace, a control character or invalid UTF-8: expected printable characters", r)
		case unicode.Is(unicode.Cf, r):
			return fmt.Errorf("character %q is an invisible Unicode format character (zero-width or bidirectional): expected visible characters", r)
		}
	}
	return nil
}
