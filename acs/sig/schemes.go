package sig

// The asymmetric algorithms of ACS §10.1 behind two small interfaces. Key
// encodings (docs/signatures.md): ECDSA and RSA keys are PKCS #8 (private)
// and PKIX SubjectPublicKeyInfo (public) DER; ML-DSA private keys are the
// 32-byte FIPS 204 seed ξ and public keys the FIPS 204 encoding; SLH-DSA
// keys are the FIPS 205 encodings; hybrid keys frame their two component
// encodings like a §10.2 value.

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/cloudflare/circl/sign"
	"github.com/cloudflare/circl/sign/mldsa/mldsa44"
	"github.com/cloudflare/circl/sign/mldsa/mldsa65"
	"github.com/cloudflare/circl/sign/mldsa/mldsa87"
	"github.com/cloudflare/circl/sign/slhdsa"
)

// rsaBits is the modulus size GenerateKey uses for RSA-PSS-SHA256 (about
// 128-bit security); minRSABits is the smallest accepted from a key file.
const (
	rsaBits    = 3072
	minRSABits = 2048
)

// pssOptions: ACS leaves the PSS salt length open; we fix it at the digest
// length, 32, on both sides. Verification does not auto-detect it.
var pssOptions = &rsa.PSSOptions{SaltLength: 32, Hash: crypto.SHA256}

type privateMaterial interface {
	sign(msg []byte) ([]byte, error)
	public() publicMaterial
	marshal() ([]byte, error)
}

type publicMaterial interface {
	// verify returns nil or a description of why the value does not verify.
	verify(msg, sig []byte) error
	marshal() ([]byte, error)
}

var errNoVerify = errors.New("value does not verify")

func generate(alg Algorithm) (privateMaterial, error) {
	switch alg {
	case ECDSAP256:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		return ecdsaPrivate{k}, nil
	case RSAPSSSHA256:
		k, err := rsa.GenerateKey(rand.Reader, rsaBits)
		if err != nil {
			return nil, err
		}
		return rsaPrivate{k}, nil
	case MLDSA44, MLDSA65, MLDSA87:
		var seed [32]byte
		if _, err := rand.Read(seed[:]); err != nil {
			return nil, err
		}
		return newMLDSAPrivate(alg, seed[:])
	case SLHDSA128s, SLHDSA128f:
		_, k, err := slhdsa.GenerateKey(rand.Reader, slhID(alg))
		if err != nil {
			return nil, err
		}
		return slhPrivate{k}, nil
	case MLDSA65ECDSAP256, MLDSA65RSAPSSSHA256:
		pqc, err := generate(MLDSA65)
		if err != nil {
			return nil, err
		}
		cls, err := generate(classicalOf(alg))
		if err != nil {
			return nil, err
		}
		return hybridPrivate{pqc, cls}, nil
	}
	return nil, fmt.Errorf("no asymmetric implementation of %q", alg)
}

func parsePrivate(alg Algorithm, b []byte) (privateMaterial, error) {
	switch alg {
	case ECDSAP256:
		return x509Key(b, "ECDSA-P256 private key", "PKCS #8", x509.ParsePKCS8PrivateKey, "a P-256 key",
			func(k *ecdsa.PrivateKey) error { return p256(k.Curve) },
			func(k *ecdsa.PrivateKey) privateMaterial { return ecdsaPrivate{k} })
	case RSAPSSSHA256:
		return x509Key(b, "RSA-PSS-SHA256 private key", "PKCS #8", x509.ParsePKCS8PrivateKey, "an RSA key",
			func(k *rsa.PrivateKey) error { return rsaModulus(k.N.BitLen()) },
			func(k *rsa.PrivateKey) privateMaterial { return rsaPrivate{k} })
	case MLDSA44, MLDSA65, MLDSA87:
		return newMLDSAPrivate(alg, b)
	case SLHDSA128s, SLHDSA128f:
		k := slhdsa.PrivateKey{ID: slhID(alg)}
		if err := k.UnmarshalBinary(b); err != nil {
			return nil, fmt.Errorf("%s private key: %w", alg, err)
		}
		return slhPrivate{k}, nil
	case MLDSA65ECDSAP256, MLDSA65RSAPSSSHA256:
		return parseHybrid(alg, "private key", b, parsePrivate, func(pqc, cls privateMaterial) privateMaterial { return hybridPrivate{pqc, cls} })
	}
	return nil, fmt.Errorf("no asymmetric implementation of %q", alg)
}

func parsePublic(alg Algorithm, b []byte) (publicMaterial, error) {
	switch alg {
	case ECDSAP256:
		return x509Key(b, "ECDSA-P256 public key", "PKIX", x509.ParsePKIXPublicKey, "a P-256 key",
			func(k *ecdsa.PublicKey) error { return p256(k.Curve) },
			func(k *ecdsa.PublicKey) publicMaterial { return ecdsaPublic{k} })
	case RSAPSSSHA256:
		return x509Key(b, "RSA-PSS-SHA256 public key", "PKIX", x509.ParsePKIXPublicKey, "an RSA key",
			func(k *rsa.PublicKey) error { return rsaModulus(k.N.BitLen()) },
			func(k *rsa.PublicKey) publicMaterial { return rsaPublic{k} })
	case MLDSA44, MLDSA65, MLDSA87:
		s := mldsaSchemes[alg].scheme
		if len(b) != s.PublicKeySize() {
			return nil, fmt.Errorf("%s public key: %d bytes, want %d", alg, len(b), s.PublicKeySize())
		}
		pk, err := s.UnmarshalBinaryPublicKey(b)
		if err != nil {
			return nil, fmt.Errorf("%s public key: %w", alg, err)
		}
		return mldsaPublic{alg, pk}, nil
	case SLHDSA128s, SLHDSA128f:
		k := slhdsa.PublicKey{ID: slhID(alg)}
		if err := k.UnmarshalBinary(b); err != nil {
			return nil, fmt.Errorf("%s public key: %w", alg, err)
		}
		return slhPublic{k}, nil
	case MLDSA65ECDSAP256, MLDSA65RSAPSSSHA256:
		return parseHybrid(alg, "public key", b, parsePublic, func(pqc, cls publicMaterial) publicMaterial { return hybridPublic{pqc, cls} })
	}
	return nil, fmt.Errorf("no asymmetric implementation of %q", alg)
}

// x509Key parses b, a key in form (PKCS #8 or PKIX), with parse and wants
// a K that check accepts. what names the key in errors; want names the key
// wanted when b holds another, or when check says errOtherKey. It returns
// the key as wrap makes it into key material.
func x509Key[K, M any](b []byte, what, form string, parse func([]byte) (any, error), want string, check func(K) error, wrap func(K) M) (M, error) {
	var zero M
	k, err := parse(b)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", what, err)
	}
	kk, ok := k.(K)
	if ok {
		err = check(kk)
	}
	switch {
	case !ok || err == errOtherKey:
		return zero, fmt.Errorf("%s: %s holds a %T, not %s", what, form, k, want)
	case err != nil:
		return zero, fmt.Errorf("%s: %w", what, err)
	}
	return wrap(kk), nil
}

// errOtherKey is a check's answer to a key of the right type that is not
// the key wanted (an ECDSA key on another curve).
var errOtherKey = errors.New("another key")

func p256(c elliptic.Curve) error {
	if c != elliptic.P256() {
		return errOtherKey
	}
	return nil
}

// rsaModulus refuses an RSA modulus shorter than minRSABits.
func rsaModulus(bits int) error {
	if bits < minRSABits {
		return fmt.Errorf("%d-bit modulus, want at least %d", bits, minRSABits)
	}
	return nil
}

// parseHybrid parses the two halves of a hybrid key of alg (ACS §10.2:
// the ML-DSA-65 key, then the classical one) with parse; what is "private
// key" or "public key", for errors. join makes the halves one key.
func parseHybrid[M any](alg Algorithm, what string, b []byte, parse func(Algorithm, []byte) (M, error), join func(pqc, cls M) M) (M, error) {
	var pqc, cls M
	p, c, err := DecodeHybrid(b)
	if err == nil {
		if pqc, err = parse(MLDSA65, p); err == nil {
			cls, err = parse(classicalOf(alg), c)
		}
	}
	if err != nil {
		var zero M
		return zero, fmt.Errorf("%s %s: %w", alg, what, err)
	}
	return join(pqc, cls), nil
}

func classicalOf(alg Algorithm) Algorithm {
	if alg == MLDSA65RSAPSSSHA256 {
		return RSAPSSSHA256
	}
	return ECDSAP256
}

// ECDSA-P256: ASN.1 DER signature over SHA-256 of the signed input.

type ecdsaPrivate struct{ k *ecdsa.PrivateKey }
type ecdsaPublic struct{ k *ecdsa.PublicKey }

func (p ecdsaPrivate) sign(msg []byte) ([]byte, error) {
	d := sha256.Sum256(msg)
	return ecdsa.SignASN1(rand.Reader, p.k, d[:])
}
func (p ecdsaPrivate) public() publicMaterial   { return ecdsaPublic{&p.k.PublicKey} }
func (p ecdsaPrivate) marshal() ([]byte, error) { return x509.MarshalPKCS8PrivateKey(p.k) }
func (p ecdsaPublic) marshal() ([]byte, error)  { return x509.MarshalPKIXPublicKey(p.k) }
func (p ecdsaPublic) verify(msg, sig []byte) error {
	d := sha256.Sum256(msg)
	if !ecdsa.VerifyASN1(p.k, d[:], sig) {
		return errNoVerify
	}
	return nil
}

// RSA-PSS-SHA256, salt length 32.

type rsaPrivate struct{ k *rsa.PrivateKey }
type rsaPublic struct{ k *rsa.PublicKey }

func (p rsaPrivate) sign(msg []byte) ([]byte, error) {
	d := sha256.Sum256(msg)
	return rsa.SignPSS(rand.Reader, p.k, crypto.SHA256, d[:], pssOptions)
}
func (p rsaPrivate) public() publicMaterial   { return rsaPublic{&p.k.PublicKey} }
func (p rsaPrivate) marshal() ([]byte, error) { return x509.MarshalPKCS8PrivateKey(p.k) }
func (p rsaPublic) marshal() ([]byte, error)  { return x509.MarshalPKIXPublicKey(p.k) }
func (p rsaPublic) verify(msg, sig []byte) error {
	d := sha256.Sum256(msg)
	if err := rsa.VerifyPSS(p.k, crypto.SHA256, d[:], sig, pssOptions); err != nil {
		return errNoVerify
	}
	return nil
}

// ML-DSA (FIPS 204), pure, empty context, hedged signing.

type mldsaScheme struct {
	scheme sign.Scheme
	// signTo signs with fresh randomness (the FIPS 204 hedged variant);
	// circl's Scheme.Sign is the deterministic variant.
	signTo func(sk sign.PrivateKey, msg []byte) ([]byte, error)
}

var mldsaSchemes = map[Algorithm]mldsaScheme{
	MLDSA44: {mldsa44.Scheme(), func(sk sign.PrivateKey, msg []byte) ([]byte, error) {
		out := make([]byte, mldsa44.SignatureSize)
		return out, mldsa44.SignTo(sk.(*mldsa44.PrivateKey), msg, nil, true, out)
	}},
	MLDSA65: {mldsa65.Scheme(), func(sk sign.PrivateKey, msg []byte) ([]byte, error) {
		out := make([]byte, mldsa65.SignatureSize)
		return out, mldsa65.SignTo(sk.(*mldsa65.PrivateKey), msg, nil, true, out)
	}},
	MLDSA87: {mldsa87.Scheme(), func(sk sign.PrivateKey, msg []byte) ([]byte, error) {
		out := make([]byte, mldsa87.SignatureSize)
		return out, mldsa87.SignTo(sk.(*mldsa87.PrivateKey), msg, nil, true, out)
	}},
}

type mldsaPrivate struct {
	alg  Algorithm
	seed []byte
	sk   sign.PrivateKey
	pk   sign.PublicKey
}

type mldsaPublic struct {
	alg Algorithm
	pk  sign.PublicKey
}

func newMLDSAPrivate(alg Algorithm, seed []byte) (privateMaterial, error) {
	s := mldsaSchemes[alg].scheme
	if len(seed) != s.SeedSize() {
		return nil, fmt.Errorf("%s private key: %d-byte seed, want %d", alg, len(seed), s.SeedSize())
	}
	pk, sk := s.DeriveKey(seed)
	return mldsaPrivate{alg, bytes.Clone(seed), sk, pk}, nil
}

func (p mldsaPrivate) sign(msg []byte) ([]byte, error) { return mldsaSchemes[p.alg].signTo(p.sk, msg) }
func (p mldsaPrivate) public() publicMaterial          { return mldsaPublic{p.alg, p.pk} }
func (p mldsaPrivate) marshal() ([]byte, error)        { return bytes.Clone(p.seed), nil }
func (p mldsaPublic) marshal() ([]byte, error)         { return p.pk.MarshalBinary() }
func (p mldsaPublic) verify(msg, sig []byte) error {
	s := mldsaSchemes[p.alg].scheme
	if len(sig) != s.SignatureSize() {
		return fmt.Errorf("%d-byte value, %s signatures are %d bytes", len(sig), p.alg, s.SignatureSize())
	}
	if !s.Verify(p.pk, msg, sig, nil) {
		return errNoVerify
	}
	return nil
}

// SLH-DSA (FIPS 205). ACS names only the security level and speed
// ("SLH-DSA-128s"); we read the names as the SHA2 parameter sets,
// SLH-DSA-SHA2-128s and SLH-DSA-SHA2-128f, which use the SHA-256 the rest
// of ACS already depends on.

func slhID(alg Algorithm) slhdsa.ID {
	if alg == SLHDSA128f {
		return slhdsa.SHA2_128f
	}
	return slhdsa.SHA2_128s
}

type slhPrivate struct{ k slhdsa.PrivateKey }
type slhPublic struct{ k slhdsa.PublicKey }

func (p slhPrivate) sign(msg []byte) ([]byte, error) {
	// Randomized (hedged) signing with an empty context.
	return slhdsa.SignRandomized(&p.k, rand.Reader, slhdsa.NewMessage(msg), nil)
}
func (p slhPrivate) public() publicMaterial   { return slhPublic{p.k.PublicKey()} }
func (p slhPrivate) marshal() ([]byte, error) { return p.k.MarshalBinary() }
func (p slhPublic) marshal() ([]byte, error)  { return p.k.MarshalBinary() }
func (p slhPublic) verify(msg, sig []byte) error {
	if !slhdsa.Verify(&p.k, slhdsa.NewMessage(msg), sig, nil) {
		return errNoVerify
	}
	return nil
}

// Hybrids (ACS §10.2): ML-DSA-65 first, then the classical component, both
// over the same signed input; both must verify.

type hybridPrivate struct{ pqc, cls privateMaterial }
type hybridPublic struct{ pqc, cls publicMaterial }

func (p hybridPrivate) sign(msg []byte) ([]byte, error) {
	ps, err := p.pqc.sign(msg)
	if err != nil {
		return nil, err
	}
	cs, err := p.cls.sign(msg)
	if err != nil {
		return nil, err
	}
	return EncodeHybrid(ps, cs), nil
}
func (p hybridPrivate) public() publicMaterial { return hybridPublic{p.pqc.public(), p.cls.public()} }
func (p hybridPrivate) marshal() ([]byte, error) {
	return marshalPair(p.pqc.marshal, p.cls.marshal)
}
func (p hybridPublic) marshal() ([]byte, error) {
	return marshalPair(p.pqc.marshal, p.cls.marshal)
}
func (p hybridPublic) verify(msg, sig []byte) error {
	ps, cs, err := DecodeHybrid(sig)
	if err != nil {
		return err
	}
	if err := p.pqc.verify(msg, ps); err != nil {
		return fmt.Errorf("ML-DSA-65 component: %w", err)
	}
	if err := p.cls.verify(msg, cs); err != nil {
		return fmt.Errorf("classical component: %w", err)
	}
	return nil
}

func marshalPair(a, b func() ([]byte, error)) ([]byte, error) {
	x, err := a()
	if err != nil {
		return nil, err
	}
	y, err := b()
	if err != nil {
		return nil, err
	}
	return EncodeHybrid(x, y), nil
}
