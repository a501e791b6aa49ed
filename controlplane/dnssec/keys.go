// Package dnssec holds a zone's DNSSEC keys, in BIND's key-file format, and
// signs RRsets online with a cache, for zones served with online signing.
package dnssec

import (
	"bufio"
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Algorithms by the names the config uses.
var algorithms = map[string]uint8{
	"ecdsap256sha256": dns.ECDSAP256SHA256,
	"ed25519":         dns.ED25519,
}

// Algorithm returns the DNSSEC algorithm number of a config name.
func Algorithm(name string) (uint8, bool) {
	a, ok := algorithms[strings.ToLower(name)]
	return a, ok
}

// AlgorithmNames lists the names Algorithm knows, for error messages.
func AlgorithmNames() []string {
	names := make([]string, 0, len(algorithms))
	for n := range algorithms {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// DNSKEY flags: a zone key, and a zone key with the SEP bit (a KSK or CSK).
const (
	flagZSK = 256
	flagKSK = 257
)

// keyTTL is the TTL of the DNSKEY set, as BIND and Knot default it.
const keyTTL = 3600

// Key is one key of a zone with its timing, as its files hold them.
type Key struct {
	DNSKEY *dns.DNSKEY
	Signer crypto.Signer
	Path   string // the .key file

	// The times of BIND's key metadata: a key is in the DNSKEY set from
	// Publish until Delete, and signs from Activate until Inactive. A zero
	// Publish or Activate is from the start, a zero Inactive or Delete
	// never.
	Created, Publish, Activate, Inactive, Delete time.Time
}

// KSK reports whether the key has the SEP bit: it signs the DNSKEY set and
// the parent's DS points at it. A zone without a ZSK signs with it alone,
// as a combined signing key (CSK).
func (k *Key) KSK() bool { return k.DNSKEY.Flags&dns.SEP != 0 }

// Tag returns the key tag.
func (k *Key) Tag() uint16 { return k.DNSKEY.KeyTag() }

// Published reports whether the key is in the DNSKEY set at t.
func (k *Key) Published(t time.Time) bool {
	return !t.Before(k.Publish) && (k.Delete.IsZero() || t.Before(k.Delete))
}

// Active reports whether the key signs at t.
func (k *Key) Active(t time.Time) bool {
	return !t.Before(k.Activate) && (k.Inactive.IsZero() || t.Before(k.Inactive))
}

// events returns the key's timing by BIND's names, zero times included.
func (k *Key) events() []event {
	return []event{{"Created", &k.Created}, {"Publish", &k.Publish}, {"Activate", &k.Activate},
		{"Inactive", &k.Inactive}, {"Delete", &k.Delete}}
}

type event struct {
	name string
	at   *time.Time
}

// Role names the key as an operator reads it: CSK, KSK or ZSK, given the
// other keys of the zone.
func Role(k *Key, keys []*Key) string {
	switch {
	case !k.KSK():
		return "ZSK"
	case slices.ContainsFunc(keys, func(o *Key) bool { return !o.KSK() }):
		return "KSK"
	}
	return "CSK"
}

// Ensure returns the keys of zone in dir, creating dir and the keys when
// it holds none: one CSK, or a KSK and a ZSK with split. Keys already
// there must all be of algorithm alg, so that a config edit cannot leave a
// zone signed with an algorithm it no longer names.
func Ensure(dir, zone string, alg uint8, split bool, now time.Time) ([]*Key, error) {
	keys, err := Load(dir, zone)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if len(keys) == 0 {
		return Generate(dir, zone, alg, split, now)
	}
	for _, k := range keys {
		if k.DNSKEY.Algorithm != alg {
			return nil, fmt.Errorf("key %s has algorithm %s, the config names %s", k.Path,
				dns.AlgorithmToString[k.DNSKEY.Algorithm], dns.AlgorithmToString[alg])
		}
	}
	return keys, nil
}

// Generate creates the keys of zone in dir: one CSK, or with split a KSK
// and a ZSK. dir is created with mode 0700 and the private keys with 0600.
func Generate(dir, zone string, alg uint8, split bool, now time.Time) ([]*Key, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating key directory: %w", err)
	}
	flags := []uint16{flagKSK}
	if split {
		flags = append(flags, flagZSK)
	}
	var keys []*Key
	for _, f := range flags {
		k, err := newKey(dir, zone, alg, f, now, now)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// newKey makes a key published at now that signs from activate.
func newKey(dir, zone string, alg uint8, flags uint16, now, activate time.Time) (*Key, error) {
	pub := &dns.DNSKEY{
		Hdr:       dns.RR_Header{Name: dns.CanonicalName(zone), Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: keyTTL},
		Flags:     flags,
		Protocol:  3,
		Algorithm: alg,
	}
	priv, err := pub.Generate(256) // the size is ignored for ECDSA P-256 and Ed25519
	if err != nil {
		return nil, fmt.Errorf("generating %s key: %w", dns.AlgorithmToString[alg], err)
	}
	now = now.UTC().Truncate(time.Second)
	k := &Key{DNSKEY: pub, Signer: priv.(crypto.Signer), Created: now, Publish: now, Activate: activate.UTC().Truncate(time.Second)}
	base := filepath.Join(dir, fmt.Sprintf("K%s+%03d+%05d", pub.Hdr.Name, alg, pub.KeyTag()))
	k.Path = base + ".key"
	// The private key is written first, and only if it is new: a key
	// file without its private key would be published and never sign.
	if err := writeNew(base+".private", privateFile(k, []byte(pub.PrivateKeyString(priv))), 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(k.Path, keyFile(k), 0o644); err != nil {
		return nil, err
	}
	return k, nil
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("writing key: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("writing key %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing key %s: %w", path, err)
	}
	return nil
}

// timeFormat is BIND's for the timing comments of a key file.
const timeFormat = "20060102150405"

// keyFile is the .key file as dnssec-keygen writes it: timing comments,
// then the DNSKEY record.
func keyFile(k *Key) []byte {
	var b bytes.Buffer
	kind := "zone-signing"
	if k.KSK() {
		kind = "key-signing"
	}
	fmt.Fprintf(&b, "; This is a %s key, keyid %d, for %s\n", kind, k.Tag(), k.DNSKEY.Hdr.Name)
	for _, e := range k.events() {
		if !e.at.IsZero() {
			fmt.Fprintf(&b, "; %s: %s (%s)\n", e.name, e.at.UTC().Format(timeFormat), e.at.UTC().Format(time.ANSIC))
		}
	}
	fmt.Fprintln(&b, k.DNSKEY.String())
	return b.Bytes()
}

// privateFile is the .private file: the key's fields, then its timing as
// BIND's own lines, which BIND reads from there rather than from the
// comments of the .key file. Timing lines already in priv are replaced.
func privateFile(k *Key, priv []byte) []byte {
	var b bytes.Buffer
	timing := map[string]bool{}
	for _, e := range k.events() {
		timing[e.name] = true
	}
	for line := range strings.Lines(string(priv)) {
		if name, _, ok := strings.Cut(line, ":"); ok && timing[name] {
			continue
		}
		b.WriteString(line)
	}
	for _, e := range k.events() {
		if !e.at.IsZero() {
			fmt.Fprintf(&b, "%s: %s\n", e.name, e.at.UTC().Format(timeFormat))
		}
	}
	return b.Bytes()
}

// Save writes the key's timing into both of its files. Each is replaced
// whole by a rename, so that a reader never sees half a file.
func (k *Key) Save() error {
	privPath := strings.TrimSuffix(k.Path, ".key") + ".private"
	priv, err := os.ReadFile(privPath)
	if err != nil {
		return fmt.Errorf("reading private key: %w", err)
	}
	if err := replace(privPath, privateFile(k, priv), 0o600); err != nil {
		return err
	}
	return replace(k.Path, keyFile(k), 0o644)
}

func replace(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".new"
	os.Remove(tmp) // left by a write that failed
	if err := writeNew(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing key: %w", err)
	}
	return nil
}

// Load reads every key of zone in dir: each K<zone>+<alg>+<tag>.key with
// its .private, KSKs first. A missing dir is os.ErrNotExist.
func Load(dir, zone string) ([]*Key, error) {
	zone = dns.CanonicalName(zone)
	matches, err := filepath.Glob(filepath.Join(dir, "K"+globEscape(zone)+"+*.key"))
	if err != nil {
		return nil, fmt.Errorf("listing keys: %w", err)
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("reading keys: %w", err)
	}
	var keys []*Key
	for _, path := range matches {
		k, err := readKey(path, zone)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	// KSKs first, as Generate returns them, then by tag.
	slices.SortFunc(keys, func(a, b *Key) int {
		if a.KSK() != b.KSK() {
			if a.KSK() {
				return -1
			}
			return 1
		}
		return int(a.Tag()) - int(b.Tag())
	})
	return keys, nil
}

func globEscape(s string) string {
	r := strings.NewReplacer(`*`, `\*`, `?`, `\?`, `[`, `\[`, `\`, `\\`)
	return r.Replace(s)
}

func readKey(path, zone string) (*Key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading key: %w", err)
	}
	k := &Key{Path: path}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if c, ok := strings.CutPrefix(line, ";"); ok {
			if err := k.timing(strings.TrimSpace(c)); err != nil {
				return nil, fmt.Errorf("reading key %s: %w", path, err)
			}
			continue
		}
		if line == "" {
			continue
		}
		rr, err := dns.NewRR(line)
		if err != nil {
			return nil, fmt.Errorf("reading key %s: %w", path, err)
		}
		pub, ok := rr.(*dns.DNSKEY)
		if !ok || dns.CanonicalName(pub.Hdr.Name) != zone {
			return nil, fmt.Errorf("reading key %s: not a DNSKEY of %s", path, zone)
		}
		k.DNSKEY = pub
	}
	if k.DNSKEY == nil {
		return nil, fmt.Errorf("reading key %s: no DNSKEY record", path)
	}
	k.DNSKEY.Hdr.Ttl = keyTTL
	privPath := strings.TrimSuffix(path, ".key") + ".private"
	f, err := os.Open(privPath)
	if err != nil {
		return nil, fmt.Errorf("reading private key: %w", err)
	}
	defer f.Close()
	priv, err := k.DNSKEY.ReadPrivateKey(f, privPath)
	if err != nil {
		return nil, fmt.Errorf("reading private key %s: %w", privPath, err)
	}
	s, ok := priv.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("reading private key %s: cannot sign with it", privPath)
	}
	k.Signer = s
	return k, nil
}

// timing reads a "Name: 20260101000000 (...)" comment; other comments
// are ignored.
func (k *Key) timing(c string) error {
	name, rest, ok := strings.Cut(c, ":")
	if !ok {
		return nil
	}
	var dst *time.Time
	for _, e := range k.events() {
		if e.name == name {
			dst = e.at
		}
	}
	if dst == nil {
		return nil
	}
	stamp, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
	t, err := time.Parse(timeFormat, stamp)
	if err != nil {
		return fmt.Errorf("%s time %q: want YYYYMMDDHHMMSS", name, stamp)
	}
	*dst = t
	return nil
}

// DS returns the SHA-256 DS record of each KSK or CSK the parent should
// hold: all but those a completed rollover retires.
func DS(keys []*Key) []*dns.DS {
	var out []*dns.DS
	for _, k := range keys {
		if k.KSK() && k.Inactive.IsZero() {
			out = append(out, k.DNSKEY.ToDS(dns.SHA256))
		}
	}
	return out
}
