package loadbalancer

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The defaults of NamerOptions (CONTRIBUTING.md A5: stated in the field
// docs, not exported).
const (
	defaultNamePrefix    = "k8s"
	defaultNameMaxLength = 63
	// defaultNameCharset is a DNS label's character set.
	defaultNameCharset = "abcdefghijklmnopqrstuvwxyz0123456789-"
)

// hashLen is the number of base-32 digits of the name hash (64 bits).
const hashLen = 13

// The hash alphabets: a Namer uses the lower-case one when its charset
// allows it, else the upper-case one.
const (
	hashAlphabetLower = "0123456789abcdefghijklmnopqrstuv"
	hashAlphabetUpper = "0123456789ABCDEFGHIJKLMNOPQRSTUV"
)

// NamerOptions configures a Namer. Its zero value is the default: prefix
// "k8s", at most 63 characters of [a-z0-9-], which is a valid DNS label and
// a valid RFC 1035 name.
type NamerOptions struct {
	// Prefix starts every name. "" means "k8s". Every character must be in
	// Charset. Choose one starting with a letter if the cloud requires
	// names to start with a letter.
	Prefix string
	// MaxLength bounds the name length in bytes. 0 means 63; negative is
	// an error. It must leave room for the prefix, a separator and the
	// 13-character hash.
	MaxLength int
	// Charset lists every character a name may contain (ASCII only). ""
	// means [a-z0-9-], a DNS label's characters. It must contain '-' (the
	// separator), the digits and either all lower-case or all upper-case
	// letters a–v (the hash alphabet).
	Charset string
}

// Namer derives cloud load-balancer names. A name is
//
//	<prefix>-<namespace>-<name>-<hash>
//
// where the namespace-name part is mapped into the character set (letters
// change case when only the other case is allowed, anything else becomes
// '-', runs of '-' collapse) and truncated to fit MaxLength, and <hash> is
// 13 base-32 digits of SHA-256(cluster, Service UID). Distinct Services
// (cluster, UID) thus get distinct names with overwhelming probability, and
// one Service always gets the same name. When nothing of the readable part
// fits, the name is <prefix>-<hash>.
//
// A Namer is immutable and safe for concurrent use. Create it with NewNamer.
type Namer struct {
	prefix  string
	max     int
	allowed [128]bool
	alpha   string // hash alphabet, one of hashAlphabetLower and hashAlphabetUpper
}

// NewNamer validates opts and returns a Namer. Errors name the
// NamerOptions field, the value and what was expected, after the prefix
// "loadbalancer.NewNamer: "; they are not wrapped.
func NewNamer(opts NamerOptions) (*Namer, error) {
	return newNamer("loadbalancer.NewNamer: NamerOptions.", opts)
}

// newNamer is NewNamer with field, the prefix of every error up to the
// field name: NewReconciler validates its Options.Naming with it.
func newNamer(field string, opts NamerOptions) (*Namer, error) {
	opts = opts.withDefaults()
	n := &Namer{prefix: opts.Prefix, max: opts.MaxLength}
	charset := opts.Charset
	for i := 0; i < len(charset); i++ {
		c := charset[i]
		if c >= 128 || c < ' ' {
			return nil, fmt.Errorf("%sCharset %q: byte %#x is not printable ASCII: expected printable ASCII characters", field, charset, c)
		}
		n.allowed[c] = true
	}
	if !n.allowed['-'] {
		return nil, fmt.Errorf("%sCharset %q: expected it to contain the separator '-'", field, charset)
	}
	switch {
	case n.hasAll(hashAlphabetLower):
		n.alpha = hashAlphabetLower
	case n.hasAll(hashAlphabetUpper):
		n.alpha = hashAlphabetUpper
	default:
		return nil, fmt.Errorf("%sCharset %q: expected it to contain the digits and the letters a-v in lower or upper case (the hash alphabet)", field, charset)
	}
	for i := 0; i < len(n.prefix); i++ {
		if c := n.prefix[i]; c >= 128 || !n.allowed[c] {
			return nil, fmt.Errorf("%sPrefix %q: character %q is not in Charset %q: expected characters of Charset", field, n.prefix, c, charset)
		}
	}
	if min := len(n.prefix) + 1 + hashLen; n.max < min {
		return nil, fmt.Errorf("%sMaxLength %d: expected 0 (the default, %d) or at least %d (prefix %q, a separator and a %d-character hash)", field, n.max, defaultNameMaxLength, min, n.prefix, hashLen)
	}
	return n, nil
}

// withDefaults fills in the zero fields of o (CONTRIBUTING.md A3).
func (o NamerOptions) withDefaults() NamerOptions {
	o.Prefix = cmp.Or(o.Prefix, defaultNamePrefix)
	o.MaxLength = cmp.Or(o.MaxLength, defaultNameMaxLength)
	o.Charset = cmp.Or(o.Charset, defaultNameCharset)
	return o
}

func (n *Namer) hasAll(s string) bool {
	for i := 0; i < len(s); i++ {
		if !n.allowed[s[i]] {
			return false
		}
	}
	return true
}

// Name returns the load-balancer name of svc in cluster. svc is only read;
// only its namespace, name and UID are used. svc must not be nil (Name
// panics: programmer misuse); NameFor takes the fields directly.
func (n *Namer) Name(cluster string, svc *v1.Service) string {
	return n.NameFor(cluster, svc.Namespace, svc.Name, svc.UID)
}

// NameFor returns the load-balancer name of the Service namespace/name with
// the given UID in cluster. Any strings are accepted; the result is always
// within the Namer's MaxLength and Charset.
func (n *Namer) NameFor(cluster, namespace, name string, uid types.UID) string {
	h := sha256.New()
	h.Write([]byte(cluster))
	h.Write([]byte{0})
	h.Write([]byte(uid))
	var sum [sha256.Size]byte
	v := binary.BigEndian.Uint64(h.Sum(sum[:0]))

	var b strings.Builder
	b.Grow(n.max)
	b.WriteString(n.prefix)
	b.WriteByte('-')
	room := n.max - len(n.prefix) - 2 - hashLen // for the readable part
	end := b.Len() + room
	n.appendReadable(&b, namespace, end)
	n.appendReadable(&b, "-", end)
	n.appendReadable(&b, name, end)
	out := strings.TrimRight(b.String(), "-")
	if len(out) > len(n.prefix) {
		out += "-"
	} else {
		out = n.prefix + "-"
	}
	var digits [hashLen]byte
	for i := hashLen - 1; i >= 0; i-- {
		digits[i] = n.alpha[v&31]
		v >>= 5
	}
	return out + string(digits[:])
}

// appendReadable appends s mapped into the charset until b is end bytes
// long, never starting the readable part with a separator and never
// writing two separators in a row.
func (n *Namer) appendReadable(b *strings.Builder, s string, end int) {
	leading := b.Len() == len(n.prefix)+1
	for i := 0; i < len(s) && b.Len() < end; i++ {
		c := n.mapByte(s[i])
		if c == '-' && (leading || b.String()[b.Len()-1] == '-') {
			continue
		}
		b.WriteByte(c)
		leading = false
	}
}

func (n *Namer) mapByte(c byte) byte {
	switch {
	case c >= 128:
		return '-'
	case n.allowed[c]:
		return c
	case 'A' <= c && c <= 'Z' && n.allowed[c+'a'-'A']:
		return c + 'a' - 'A'
	case 'a' <= c && c <= 'z' && n.allowed[c-'a'+'A']:
		return c - 'a' + 'A'
	}
	return '-'
}
