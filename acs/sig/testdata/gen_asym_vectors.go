//go:build ignore

//go:debug cryptocustomrand=1

// gen_asym_vectors writes asym_vectors.json: for every asymmetric algorithm
// of ACS §10.1, a public key file and a signed ACS response envelope. It
// pins the wire contract of docs/signatures.md (ECDSA DER, PSS salt length
// 32, FIPS 204/205 with empty context, SLH-DSA SHA2 parameter sets, the
// §10.2 hybrid framing, the key file encodings) by signing with the
// standard library and circl directly, not through package sig.
//
// It is deterministic: all randomness is a SHAKE256 stream of a fixed
// label (cryptocustomrand=1 lets crypto/rsa take it), ECDSA signs per
// RFC 6979, ML-DSA uses its deterministic variant and SLH-DSA its
// deterministic signing. Running it twice writes the same file.
//
// Run from this directory: go run gen_asym_vectors.go
package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha3"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cloudflare/circl/sign/mldsa/mldsa44"
	"github.com/cloudflare/circl/sign/mldsa/mldsa65"
	"github.com/cloudflare/circl/sign/mldsa/mldsa87"
	"github.com/cloudflare/circl/sign/slhdsa"
)

func stream(label string) io.Reader {
	s := sha3.NewSHAKE256()
	s.Write([]byte("acsledger asymmetric vectors: " + label))
	return s
}

func read(r io.Reader, n int) []byte {
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		panic(err)
	}
	return b
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// frame is the §10.2 framing, written out here independently of package sig.
func frame(a, b []byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(a)))
	out = append(out, a...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
	return append(out, b...)
}

type component struct {
	pub  []byte
	sign func(msg []byte) []byte
}

func ecdsaKey(label string) component {
	// A scalar below the P-256 order: 31 random bytes after a zero byte.
	raw := append([]byte{0}, read(stream(label), 31)...)
	k := must(ecdsa.ParseRawPrivateKey(elliptic.P256(), raw))
	return component{
		pub: must(x509.MarshalPKIXPublicKey(&k.PublicKey)),
		sign: func(msg []byte) []byte {
			d := sha256.Sum256(msg)
			return must(k.Sign(nil, d[:], crypto.SHA256)) // RFC 6979
		},
	}
}

func rsaKey(label string) component {
	k := must(rsa.GenerateKey(stream(label), 3072))
	return component{
		pub: must(x509.MarshalPKIXPublicKey(&k.PublicKey)),
		sign: func(msg []byte) []byte {
			d := sha256.Sum256(msg)
			return must(rsa.SignPSS(stream(label+" salt"), k, crypto.SHA256, d[:], &rsa.PSSOptions{SaltLength: 32}))
		},
	}
}

func mldsaKey(alg, label string) component {
	seed := [32]byte(read(stream(label), 32))
	switch alg {
	case "ML-DSA-44":
		pk, sk := mldsa44.NewKeyFromSeed(&seed)
		return mldsaComponent(pk.Bytes(), sk, mldsa44.SignatureSize, mldsa44.SignTo)
	case "ML-DSA-65":
		pk, sk := mldsa65.NewKeyFromSeed(&seed)
		return mldsaComponent(pk.Bytes(), sk, mldsa65.SignatureSize, mldsa65.SignTo)
	default:
		pk, sk := mldsa87.NewKeyFromSeed(&seed)
		return mldsaComponent(pk.Bytes(), sk, mldsa87.SignatureSize, mldsa87.SignTo)
	}
}

// mldsaComponent signs with signTo, FIPS 204's deterministic variant with
// an empty context.
func mldsaComponent[SK any](pub []byte, sk SK, size int, signTo func(SK, []byte, []byte, bool, []byte) error) component {
	return component{pub, func(msg []byte) []byte {
		out := make([]byte, size)
		must(0, signTo(sk, msg, nil, false, out))
		return out
	}}
}

func slhKey(id slhdsa.ID, label string) component {
	pk, sk := must2(slhdsa.GenerateKey(stream(label), id))
	return component{must(pk.MarshalBinary()), func(msg []byte) []byte {
		return must(slhdsa.SignDeterministic(&sk, slhdsa.NewMessage(msg), nil))
	}}
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

func hybrid(pqc, cls component) component {
	return component{frame(pqc.pub, cls.pub), func(msg []byte) []byte {
		return frame(pqc.sign(msg), cls.sign(msg))
	}}
}

// The response envelope in RFC 8785 form; @@ is where result.signature goes.
const template = `{"id":7,"jsonrpc":"2.0","result":{"acs_version":"0.1.0",` +
	`"chain_hash":"5d41402abc4b2a76b9719d911017c592aaf4c8e5e1b1b3c0f2a4c6e8d0b2f4a6","decision":"deny",` +
	`"reasoning":"rm -rf is not allowed","request_id":"0b7e6f2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b",@@"type":"final"}}`

type keyFile struct {
	KeyID     string `json:"key_id"`
	Algorithm string `json:"algorithm"`
	Public    string `json:"public"`
}

type vector struct {
	Algorithm      string  `json:"algorithm"`
	PublicKeyFile  keyFile `json:"public_key_file"`
	SignedInput    string  `json:"signed_input"`
	SignedEnvelope string  `json:"signed_envelope"`
}

func main() {
	keys := []struct {
		alg string
		c   component
	}{
		{"ECDSA-P256", ecdsaKey("ECDSA-P256")},
		{"RSA-PSS-SHA256", rsaKey("RSA-PSS-SHA256")},
		{"ML-DSA-65", mldsaKey("ML-DSA-65", "ML-DSA-65")},
		{"ML-DSA-44", mldsaKey("ML-DSA-44", "ML-DSA-44")},
		{"ML-DSA-87", mldsaKey("ML-DSA-87", "ML-DSA-87")},
		{"SLH-DSA-128s", slhKey(slhdsa.SHA2_128s, "SLH-DSA-128s")},
		{"SLH-DSA-128f", slhKey(slhdsa.SHA2_128f, "SLH-DSA-128f")},
		{"ML-DSA-65+ECDSA-P256", hybrid(mldsaKey("ML-DSA-65", "hybrid-1 pqc"), ecdsaKey("hybrid-1 classical"))},
		{"ML-DSA-65+RSA-PSS-SHA256", hybrid(mldsaKey("ML-DSA-65", "hybrid-2 pqc"), rsaKey("hybrid-2 classical"))},
	}
	unsigned := strings.Replace(template, "@@", "", 1)
	var out []vector
	for _, k := range keys {
		keyID := "vector-" + strings.ToLower(k.alg)
		value := base64.StdEncoding.EncodeToString(k.c.sign([]byte(unsigned)))
		sigObj := fmt.Sprintf(`{"algorithm":%q,"key_id":%q,"value":%q}`, k.alg, keyID, value)
		out = append(out, vector{
			Algorithm:      k.alg,
			PublicKeyFile:  keyFile{keyID, k.alg, base64.StdEncoding.EncodeToString(k.c.pub)},
			SignedInput:    unsigned,
			SignedEnvelope: strings.Replace(template, "@@", `"signature":`+sigObj+`,`, 1),
		})
	}
	b := must(json.MarshalIndent(out, "", "  "))
	if err := os.WriteFile("asym_vectors.json", append(b, '\n'), 0o644); err != nil {
		panic(err)
	}
}
