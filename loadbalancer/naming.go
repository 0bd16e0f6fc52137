package loadbalancer

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Defaults of NamingConfig.
const (
	DefaultNamePrefix    = "k8s"
	DefaultNameMaxLength = 63
	// DefaultNameCharset is a DNS label's character set.
	DefaultNameCharset = "abcdefghijklmnopqrstuvwxyz0123456789-"
)

// hashLen is the number of base-32 digits of the name hash (64 bits).
const hashLen = 13

// The hash alphabets: a Namer uses the lower-case one when its charset
// allows it, else the upper-case one.
const (
	hashAlphabetLower = "0123456789abcdefghijklmnopqrstuv"
	hashAlphabetUpper = "0123456789ABCDEFGHIJKLMNOPQRSTUV"
)

// NamingConfig configures a Namer. Its zero value is the default: prefix
// "k8s", at most 63 characters of [a-z0-9-], which is a valid DNS label and
// a valid RFC 1035 name.
type NamingConfig struct {
	// Prefix starts every name; "" means DefaultNamePrefix. Every character
	// must be in Charset. Choose one starting with a letter if the cloud
	// requires names to start with a letter.
	Prefix string
	// MaxLength bounds the name length in bytes; 0 means
	// DefaultNameMaxLength. It must leave room for the prefix, a
	// separator and the 13-character hash.
	MaxLength int
	// Charset lists every character a name may contain (ASCII only); ""
	// means DefaultNameCharset. It must contain '-' (the separator), the
	// digits and either all lower-case or all upper-case letters a–v (the
	// hash alphabet).
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

// NewNamer validates cfg and returns a Namer. Errors name the NamingConfig
// field, the value and what was expected; they are not wrapped.
func NewNamer(cfg NamingConfig) (*Namer, error) {
	n := &Namer{prefix: cfg.Prefix, max: cfg.MaxLength}
	if n.prefix == "" {
		n.prefix = DefaultNamePrefix
	}
	if n.max == 0 {
		n.max = DefaultNameMaxLength
	}
	charset := cfg.Charset
	if charset == "" {
		charset = DefaultNameCharset
	}
	for i := 0; i < len(charset); i++ {
		c := charset[i]
		if c >= 128 || c < ' ' {
			return nil, fmt.Errorf("NamingConfig.Charset %q: byte %#x is not printable ASCII; expected printable ASCII characters", charset, c)
		}
		n.allowed[c] = true
	}
	if !n.allowed['-'] {
		return nil, fmt.Errorf("NamingConfig.Charset %q: expected it to contain the separator '-'", charset)
	}
	switch {
	case n.hasAll(hashAlphabetLower):
		n.alpha = hashAlphabetLower
	case n.hasAll(hashAlphabetUpper):
		n.alpha = hashAlphabetUpper
	default:
		return nil, fmt.Errorf("NamingConfig.Charset %q: expected it to contain the digits and the letters a-v in lower or upper case (the hash alphabet)", charset)
	}
	for i := 0; i < len(n.prefix); i++ {
		if c := n.prefix[i]; c >= 128 || !n.allowed[c] {
			return nil, fmt.Errorf("NamingConfig.Prefix %q: character %q is not in Charset %q", n.prefix, c, charset)
		}
	}
	if min := len(n.prefix) + 1 + hashLen; n.max < min {
		return nil, fmt.Errorf("NamingConfig.MaxLength %d: expected at least %d (prefix %q, a separator and a %d-character hash)", cfg.MaxLength, min, n.prefix, hashLen)
	}
	return n, nil
}

func (n *Namer) hasAll(s string) bool {
	for i := 0; i < len(s); i++ {
		if !n.allowed[s[i]] {
			return false
		}
	}
	return true
}

// MaxLength returns the configured maximum name length.
func (n *Namer) MaxLength() int { return n.max }

// Valid reports whether name is within the Namer's length and character set.
func (n *Namer) Valid(name string) bool {
	if len(name) > n.max {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 128 || !n.allowed[c] {
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
// valid for the Namer (see Valid).
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
