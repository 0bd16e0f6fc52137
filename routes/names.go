package routes

import (
	"cmp"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
)

// Name-format defaults, used for the zero values of NamerOptions' fields.
const (
	// An RFC 1035 label, the tightest common cloud limit (GCE resource
	// names).
	defaultMaxNameLength = 63
	// RFC 4648 base32, lowercased: valid in RFC 1035 labels and in every
	// common cloud's route names.
	defaultAlphabet = "abcdefghijklmnopqrstuvwxyz234567"
	// minHashChars is the shortest hashed body: 16 base32 characters, 80 bits.
	minHashChars = 16
	// maxHashChars is a whole SHA-256 digest in base32.
	maxHashChars = 52
)

// NamerOptions configures a Namer. Every field is optional; the zero value
// means no prefix and names of at most 63 characters over the lowercase
// base32 alphabet.
type NamerOptions struct {
	// Prefix starts every name, for example "k8s-" or "k8s-<cluster>-". It
	// is used as given (it must itself be valid for the cloud); Parse
	// rejects names without it. "" means no prefix.
	Prefix string
	// MaxLength is the longest name the cloud accepts, in bytes. It must
	// leave room for at least 17 characters after Prefix. 0 means 63 (an
	// RFC 1035 label); negative is an error.
	MaxLength int
	// Alphabet is the encoding alphabet of the name after Prefix: exactly
	// 32 distinct printable ASCII characters (no '=', no space), the
	// symbols of a base32 encoding, in the order of their values. It is
	// not a set of allowed characters (the loadbalancer package's
	// Charset): every name uses it all, in this order, so that a name maps
	// back to what it encodes. "" means "abcdefghijklmnopqrstuvwxyz234567"
	// (RFC 4648 base32, lowercased). Alphabet[17] ('r' by default) marks a
	// reversible name and Alphabet[7] ('h') a hashed one; with the default
	// both are letters, so names are valid RFC 1035 labels even with an
	// empty Prefix.
	Alphabet string
}

// Namer makes deterministic route names, unique per (nameHint, CIDR), within
// the limits of its NamerOptions, and maps them back.
//
// A name is Prefix, a marker character, and a body:
//
//   - reversible form (marker Alphabet[17]): a compact binary encoding of
//     nameHint and the CIDR string, in base32 over Alphabet. A node UID in
//     canonical form takes 16 bytes and a canonically spelled CIDR 5 or 17,
//     so a dual-stack node's names fit in 63 characters with a prefix of up
//     to 6 characters. Any other spelling is stored byte for byte. Parse
//     returns exactly the (nameHint, CIDR) strings given to Name.
//   - hashed form (marker Alphabet[7]), used only when the reversible form
//     is longer than MaxLength: a truncated SHA-256 of (nameHint, CIDR), at
//     least 80 bits. Parse reports ErrHashedName for it.
//
// Different (nameHint, CIDR) pairs get different names (the reversible
// encoding is injective; hashed names collide with negligible probability),
// so a dual-stack node's IPv4 and IPv6 routes, which share nameHint, never
// share a name. A Namer is immutable and safe for concurrent use.
type Namer struct {
	prefix    string
	maxLen    int
	alphabet  string
	enc       *base32.Encoding
	revMarker byte
	hashMark  byte
	hashLen   int
}

// NewNamer validates opts and returns its Namer. The error names the
// field, its value and what was expected, and wraps nothing.
func NewNamer(opts NamerOptions) (*Namer, error) {
	return newNamer("routes.NewNamer", "NamerOptions", opts)
}

// newNamer is NewNamer for the constructor fn, whose opts are at field.
func newNamer(fn, field string, o NamerOptions) (*Namer, error) {
	if o.MaxLength < 0 {
		return nil, fmt.Errorf("%s: %s.MaxLength %d: expected 0 (the default, %d) or a positive length", fn, field, o.MaxLength, defaultMaxNameLength)
	}
	o.MaxLength = cmp.Or(o.MaxLength, defaultMaxNameLength)
	o.Alphabet = cmp.Or(o.Alphabet, defaultAlphabet)
	if err := checkAlphabet(o.Alphabet); err != "" {
		return nil, fmt.Errorf("%s: %s.Alphabet %q: %s", fn, field, o.Alphabet, err)
	}
	room := o.MaxLength - len(o.Prefix) - 1
	if room < minHashChars {
		return nil, fmt.Errorf("%s: %s.MaxLength %d with Prefix %q (%d bytes): expected room for at least %d characters after the prefix", fn, field, o.MaxLength, o.Prefix, len(o.Prefix), minHashChars+1)
	}
	return &Namer{
		prefix:    o.Prefix,
		maxLen:    o.MaxLength,
		alphabet:  o.Alphabet,
		enc:       base32.NewEncoding(o.Alphabet).WithPadding(base32.NoPadding),
		revMarker: o.Alphabet[17],
		hashMark:  o.Alphabet[7],
		hashLen:   min(room, maxHashChars),
	}, nil
}

// checkAlphabet returns what is wrong with a, after ": ", or "".
func checkAlphabet(a string) string {
	if len(a) != 32 {
		return fmt.Sprintf("%d characters: expected exactly 32", len(a))
	}
	var seen [128]bool
	for i := 0; i < len(a); i++ {
		c := a[i]
		if c <= ' ' || c > '~' || c == '=' {
			return fmt.Sprintf("character %q at %d: expected printable ASCII other than space and '='", c, i)
		}
		if seen[c] {
			return fmt.Sprintf("character %q repeats: expected 32 distinct characters", c)
		}
		seen[c] = true
	}
	return ""
}

// NameKey is what a route name encodes: the nameHint given to CreateRoute
// (the node UID) and the destination CIDR exactly as spelled.
type NameKey struct {
	// NameHint is the nameHint given to Name.
	NameHint string
	// CIDR is the destination CIDR given to Name, byte for byte.
	CIDR string
}

// Name returns the route name for (nameHint, cidr). It is deterministic,
// never longer than the format's MaxLength, written in its Alphabet after
// Prefix, and accepts any strings (validation is the caller's).
func (n *Namer) Name(nameHint, cidr string) string {
	raw := encodeKey(nameHint, cidr)
	if len(n.prefix)+1+n.enc.EncodedLen(len(raw)) <= n.maxLen {
		return n.prefix + string(n.revMarker) + n.enc.EncodeToString(raw)
	}
	sum := sha256.Sum256(hashInput(nameHint, cidr))
	return n.prefix + string(n.hashMark) + n.enc.EncodeToString(sum[:])[:n.hashLen]
}

// Parse maps a name made by Name back to its (nameHint, CIDR). It returns an
// error wrapping ErrHashedName for a hashed name (made by this Namer, but not
// decodable) and one wrapping ErrForeignName for any name Name cannot have
// produced. Parse(Name(h, c)) is (NameKey{h, c}, nil) whenever the name is in
// reversible form, and a successful Parse(s) implies Name(key) == s.
func (n *Namer) Parse(name string) (NameKey, error) {
	body, ok := strings.CutPrefix(name, n.prefix)
	if !ok || body == "" {
		return NameKey{}, fmt.Errorf("routes: route name %q: expected the prefix %q and a marker: %w", cut(name), n.prefix, ErrForeignName)
	}
	marker, body := body[0], body[1:]
	switch marker {
	case n.hashMark:
		if len(body) != n.hashLen || strings.Trim(body, n.alphabet) != "" {
			return NameKey{}, fmt.Errorf("routes: route name %q: expected %d characters of %q after the hash marker: %w", cut(name), n.hashLen, n.alphabet, ErrForeignName)
		}
		return NameKey{}, fmt.Errorf("routes: route name %q: %w", cut(name), ErrHashedName)
	case n.revMarker:
		raw, err := n.enc.DecodeString(body)
		if err != nil {
			return NameKey{}, fmt.Errorf("routes: route name %q: body is not base32 over %q: %w", cut(name), n.alphabet, ErrForeignName)
		}
		k, ok := decodeKey(raw)
		if !ok || n.Name(k.NameHint, k.CIDR) != name {
			return NameKey{}, fmt.Errorf("routes: route name %q: body is not a canonical (nameHint, CIDR) encoding: %w", cut(name), ErrForeignName)
		}
		return k, nil
	default:
		return NameKey{}, fmt.Errorf("routes: route name %q: marker %q after the prefix: expected %q or %q: %w", cut(name), marker, n.revMarker, n.hashMark, ErrForeignName)
	}
}

// Binary key encoding: a header byte, the hint, the CIDR.
//
//	header bit 0:    hint is a canonical UUID, stored as 16 bytes;
//	                 otherwise a uvarint length and the bytes.
//	header bits 1-2: 1 = canonical IPv4 prefix (4 address bytes + bits),
//	                 2 = canonical IPv6 prefix (16 + bits),
//	                 0 = the CIDR bytes as given (the rest of the key).
const (
	hdrUUID    = 1 << 0
	hdrCIDRv4  = 1 << 1
	hdrCIDRv6  = 2 << 1
	hdrCIDRRaw = 0
	hdrCIDR    = 3 << 1
)

func encodeKey(hint, cidr string) []byte {
	buf := make([]byte, 1, 1+binary.MaxVarintLen64+len(hint)+len(cidr))
	if u, ok := uuidBytes(hint); ok {
		buf[0] |= hdrUUID
		buf = append(buf, u[:]...)
	} else {
		buf = binary.AppendUvarint(buf, uint64(len(hint)))
		buf = append(buf, hint...)
	}
	p, err := netip.ParsePrefix(cidr)
	switch {
	case err != nil || p.String() != cidr:
		buf = append(buf, cidr...)
	case p.Addr().Is4():
		buf[0] |= hdrCIDRv4
		a := p.Addr().As4()
		buf = append(append(buf, a[:]...), byte(p.Bits())) //nolint:gosec // G115: a prefix length, 0-32
	default:
		buf[0] |= hdrCIDRv6
		a := p.Addr().As16()
		buf = append(append(buf, a[:]...), byte(p.Bits())) //nolint:gosec // G115: a prefix length, 0-128
	}
	return buf
}

func decodeKey(b []byte) (NameKey, bool) {
	if len(b) == 0 || b[0]&^(hdrUUID|hdrCIDR) != 0 || b[0]&hdrCIDR == hdrCIDR {
		return NameKey{}, false
	}
	h, b := b[0], b[1:]
	var k NameKey
	if h&hdrUUID != 0 {
		if len(b) < 16 {
			return NameKey{}, false
		}
		k.NameHint, b = uuidString(b[:16]), b[16:]
	} else {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) { //nolint:gosec // G115: 0 < n <= len(b), the bytes Uvarint read of b
			return NameKey{}, false
		}
		k.NameHint, b = string(b[n:n+int(l)]), b[n+int(l):] //nolint:gosec // G115: l is at most len(b)-n, checked above
	}
	switch h & hdrCIDR {
	case hdrCIDRRaw:
		k.CIDR = string(b)
	case hdrCIDRv4:
		if len(b) != 5 || b[4] > 32 {
			return NameKey{}, false
		}
		k.CIDR = netip.PrefixFrom(netip.AddrFrom4([4]byte(b[:4])), int(b[4])).String()
	case hdrCIDRv6:
		if len(b) != 17 || b[16] > 128 {
			return NameKey{}, false
		}
		k.CIDR = netip.PrefixFrom(netip.AddrFrom16([16]byte(b[:16])), int(b[16])).String()
	}
	return k, true
}

// hashInput is an unambiguous serialization of (hint, cidr) for hashing.
func hashInput(hint, cidr string) []byte {
	b := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(hint)+len(cidr)), uint64(len(hint)))
	return append(append(b, hint...), cidr...)
}

// uuidBytes reports whether s is a UUID in canonical lowercase
// 8-4-4-4-12 form (how Kubernetes spells object UIDs) and returns its bytes.
func uuidBytes(s string) ([16]byte, bool) {
	var u [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return u, false
		}
	}
	if _, err := hex.Decode(u[:], []byte(h)); err != nil {
		return u, false
	}
	return u, true
}

func uuidString(b []byte) string {
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
