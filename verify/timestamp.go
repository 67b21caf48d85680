package verify

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/digitorus/pkcs7"
	"github.com/digitorus/timestamp"
)

// Trusted time for checkpoints: an [RFC 3161] time-stamping authority
// (TSA) signs the SHA-256 of a checkpoint's note text, so the time a tree
// existed by is vouched for by someone other than the log's operator. The
// parsing is github.com/digitorus/timestamp and pkcs7 (no network), the
// checks are ours.
//
// [RFC 3161]: https://www.rfc-editor.org/rfc/rfc3161

// Finding codes of trusted time (docs/findings.md).
const (
	// CodeTimestampInvalid: a checkpoint's RFC 3161 time-stamp does not
	// verify: it does not parse, the authority refused the request, its
	// message imprint is not the checkpoint's, or its signature does not
	// chain to a trusted TSA certificate.
	CodeTimestampInvalid = "timestamp_invalid"

	// CodeTimestampMissing: a time-stamp was required (acsverify
	// --require-timestamp) and the checkpoint has none.
	CodeTimestampMissing = "timestamp_missing"

	// CodeTimestampNotChecked (a notice): a receipt carries a time-stamp
	// and no TSA certificate was given to check it against.
	CodeTimestampNotChecked = "timestamp_not_checked"
)

// MaxTimestampSize bounds a time-stamp response: a token with a short
// certificate chain is a few KiB.
const MaxTimestampSize = 64 << 10

// CheckpointText returns the text of a signed checkpoint note: its lines up
// to the blank line before the signatures, each with its newline. This is
// what the log signs and what a time-stamp's message imprint hashes, so
// witness cosignatures added later change neither.
func CheckpointText(signed []byte) ([]byte, error) {
	i := bytes.Index(signed, []byte("\n\n"))
	if i < 0 {
		return nil, errors.New("checkpoint note has no blank line before its signatures")
	}
	return signed[:i+1], nil
}

// TimestampImprint is the message imprint the log asks a TSA to stamp for
// a signed checkpoint: SHA-256 of its note text ([CheckpointText]).
func TimestampImprint(signed []byte) ([32]byte, error) {
	text, err := CheckpointText(signed)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(text), nil
}

// ParseTSACerts reads PEM certificates (the TSA's own certificate or a CA
// that issued it) into the pool [CheckTimestamp] trusts. It refuses input
// holding no certificate or any other PEM block.
func ParseTSACerts(b []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			if len(bytes.TrimSpace(rest)) > 0 {
				return nil, fmt.Errorf("TSA certificates: data after certificate %d is not PEM", n)
			}
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("TSA certificates: block %d is %q, want CERTIFICATE", n+1, blk.Type)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("TSA certificates: certificate %d: %w", n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, errors.New("TSA certificates: no PEM certificate found")
	}
	return pool, nil
}

// CheckTimestamp verifies an RFC 3161 TimeStampResp (DER, as
// `openssl ts -reply` writes and acsledger serves it) for the signed
// checkpoint note: the response is granted, its token's message imprint is
// SHA-256 over the checkpoint text, the token's CMS signature verifies, and
// its signer certificate chains to roots for time-stamping (RFC 3161 §2.3:
// extended key usage id-kp-timeStamping) at the stamped time. It returns
// the time the authority vouches for. roots nil checks everything but the
// chain (for the log's own use before storing a response it got).
func CheckTimestamp(response, signed []byte, roots *x509.CertPool) (time.Time, error) {
	if len(response) == 0 || len(response) > MaxTimestampSize {
		return time.Time{}, fmt.Errorf("time-stamp response of %d bytes, want 1 to %d", len(response), MaxTimestampSize)
	}
	// ParseResponse refuses a response whose status is not granted and
	// checks the CMS signature with the certificate the token carries.
	ts, err := timestamp.ParseResponse(response)
	if err != nil {
		return time.Time{}, fmt.Errorf("time-stamp response does not parse or verify: %w", err)
	}
	return checkStamp(ts, signed, roots)
}

// TimestampToken returns the TimeStampToken (DER CMS ContentInfo, RFC 3161
// §2.4.2) a granted time-stamp response for the signed checkpoint note
// carries: what a receipt holds in its timestamp_token member. The
// response is checked as by [CheckTimestamp] without the certificate
// chain (roots nil), in one parse.
func TimestampToken(response, signed []byte) ([]byte, error) {
	if len(response) == 0 || len(response) > MaxTimestampSize {
		return nil, fmt.Errorf("time-stamp response of %d bytes, want 1 to %d", len(response), MaxTimestampSize)
	}
	ts, err := timestamp.ParseResponse(response)
	if err != nil {
		return nil, fmt.Errorf("time-stamp response does not parse or verify: %w", err)
	}
	if _, err := checkStamp(ts, signed, nil); err != nil {
		return nil, err
	}
	return ts.RawToken, nil
}

// CheckTimestampToken is [CheckTimestamp] for a bare TimeStampToken (DER,
// as `openssl ts -reply -token_out` writes it and a receipt carries it)
// rather than the whole response: a token exists only for a granted
// request, so there is no status to check.
func CheckTimestampToken(token, signed []byte, roots *x509.CertPool) (time.Time, error) {
	if len(token) == 0 || len(token) > MaxTimestampSize {
		return time.Time{}, fmt.Errorf("time-stamp token of %d bytes, want 1 to %d", len(token), MaxTimestampSize)
	}
	// DER has one spelling: the token must be one value, every
	// constructed value exactly filled by its elements.
	if err := strictDER(token, 0); err != nil {
		return time.Time{}, fmt.Errorf("time-stamp token is not DER: %w", err)
	}
	if err := tokenShape(token); err != nil {
		return time.Time{}, fmt.Errorf("time-stamp token: %w", err)
	}
	ts, err := timestamp.Parse(token)
	if err != nil {
		return time.Time{}, fmt.Errorf("time-stamp token does not parse or verify: %w", err)
	}
	return checkStamp(ts, signed, roots)
}

// checkStamp checks a parsed time-stamp against the signed checkpoint note
// and, when roots is not nil, its signer's chain.
func checkStamp(ts *timestamp.Timestamp, signed []byte, roots *x509.CertPool) (time.Time, error) {
	want, err := TimestampImprint(signed)
	if err != nil {
		return time.Time{}, err
	}
	if ts.HashAlgorithm != crypto.SHA256 {
		return time.Time{}, fmt.Errorf("time-stamp imprint uses %v, want SHA-256", ts.HashAlgorithm)
	}
	if !bytes.Equal(ts.HashedMessage, want[:]) {
		return time.Time{}, fmt.Errorf("time-stamp imprint %x is not the checkpoint's %x", ts.HashedMessage, want)
	}
	if roots == nil {
		return ts.Time, nil
	}
	p7, err := pkcs7.Parse(ts.RawToken)
	if err != nil {
		return time.Time{}, fmt.Errorf("time-stamp token does not parse: %w", err)
	}
	if len(p7.Certificates) == 0 {
		return time.Time{}, errors.New("time-stamp token carries no certificate to check against the TSA certificate")
	}
	err = p7.VerifyWithOpts(x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: ts.Time,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageTimeStamping},
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("time-stamp signer is not a trusted TSA: %w", err)
	}
	// CMS signs neither the certificates a token carries nor their
	// order, so a certificate that takes no part in the chain above
	// could be edited unnoticed. Every one must chain to the trusted
	// certificates itself: a token is then either as the TSA made it or
	// refused.
	inter := x509.NewCertPool()
	for _, c := range p7.Certificates {
		inter.AddCert(c)
	}
	for i, c := range p7.Certificates {
		_, err := c.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: ts.Time, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		if err != nil {
			return time.Time{}, fmt.Errorf("time-stamp token certificate %d (%s) does not chain to a trusted TSA certificate: %w", i+1, c.Subject, err)
		}
	}
	return ts.Time, nil
}

// strictDER checks that b is exactly one DER value whose constructed
// values (recursively, to a bounded depth) hold a whole number of DER
// values and nothing else. encoding/asn1 checks the minimal length
// forms; parsers of CMS skip over parts they do not read, which this
// makes sure hold no stray bytes.
func strictDER(b []byte, depth int) error {
	if depth > 32 {
		return errors.New("nested deeper than 32")
	}
	var v asn1.RawValue
	rest, err := asn1.Unmarshal(b, &v)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("%d bytes after a value", len(rest))
	}
	if !v.IsCompound {
		return nil
	}
	for in := v.Bytes; len(in) > 0; {
		var e asn1.RawValue
		next, err := asn1.Unmarshal(in, &e)
		if err != nil {
			return err
		}
		if err := strictDER(e.FullBytes, depth+1); err != nil {
			return err
		}
		in = next
	}
	return nil
}

var (
	oidSignedData = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 2}
	oidTSTInfo    = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 16, 1, 4}
	derNull       = []byte{0x05, 0x00}
)

// tokenShape checks the parts of a TimeStampToken that its CMS signature
// does not cover and CMS parsers skip (RFC 5652 §5.1, RFC 3161 §2.4.2):
// the content types, the SignedData and SignerInfo versions, the
// eContent's OCTET STRING wrapper, and the digestAlgorithms
// list, which must name exactly the signers' digest algorithms, each with
// absent or NULL parameters. With these pinned, a changed byte of a token
// fails a check or its signature.
func tokenShape(token []byte) error {
	var ci struct {
		ContentType asn1.ObjectIdentifier
		Content     asn1.RawValue `asn1:"explicit,tag:0"`
	}
	if _, err := asn1.Unmarshal(token, &ci); err != nil {
		return fmt.Errorf("not a ContentInfo: %w", err)
	}
	if !ci.ContentType.Equal(oidSignedData) {
		return fmt.Errorf("content type %v, want signedData", ci.ContentType)
	}
	var sd struct {
		Version          int
		DigestAlgorithms []asn1.RawValue `asn1:"set"`
		Encap            struct {
			EContentType asn1.ObjectIdentifier
			EContent     asn1.RawValue `asn1:"optional,tag:0"`
		}
		Certificates asn1.RawValue   `asn1:"optional,tag:0"`
		CRLs         asn1.RawValue   `asn1:"optional,tag:1"`
		SignerInfos  []asn1.RawValue `asn1:"set"`
	}
	if _, err := asn1.Unmarshal(ci.Content.Bytes, &sd); err != nil {
		return fmt.Errorf("not a SignedData: %w", err)
	}
	if sd.Version != 3 {
		return fmt.Errorf("SignedData version %d, want 3", sd.Version)
	}
	if !sd.Encap.EContentType.Equal(oidTSTInfo) {
		return fmt.Errorf("encapsulated content type %v, want id-ct-TSTInfo", sd.Encap.EContentType)
	}
	var e asn1.RawValue
	if rest, err := asn1.Unmarshal(sd.Encap.EContent.Bytes, &e); err != nil || len(rest) > 0 ||
		e.Class != asn1.ClassUniversal || e.Tag != asn1.TagOctetString || e.IsCompound {
		return errors.New("the encapsulated TSTInfo is not in a primitive OCTET STRING")
	}
	var signers [][]byte
	for i, raw := range sd.SignerInfos {
		var si struct {
			Version         int
			SID             asn1.RawValue
			DigestAlgorithm asn1.RawValue
		}
		// The members after digestAlgorithm are read by the CMS parser.
		if _, err := asn1.Unmarshal(raw.FullBytes, &si); err != nil {
			return fmt.Errorf("signer %d: %w", i+1, err)
		}
		// RFC 5652 §5.3: version 1 with issuerAndSerialNumber, 3 with
		// subjectKeyIdentifier ([0]).
		byKeyID := si.SID.Class == asn1.ClassContextSpecific && si.SID.Tag == 0
		if (byKeyID && si.Version != 3) || (!byKeyID && si.Version != 1) {
			return fmt.Errorf("signer %d: version %d does not match its signer identifier", i+1, si.Version)
		}
		signers = append(signers, si.DigestAlgorithm.FullBytes)
	}
	if len(sd.DigestAlgorithms) == 0 || len(signers) == 0 {
		return errors.New("no digest algorithm or no signer")
	}
	for _, set := range [][][]byte{signers, rawFull(sd.DigestAlgorithms)} {
		for _, a := range set {
			var alg struct {
				Algorithm asn1.ObjectIdentifier
				Params    asn1.RawValue `asn1:"optional"`
			}
			rest, err := asn1.Unmarshal(a, &alg)
			if err != nil || len(rest) > 0 || (len(alg.Params.FullBytes) > 0 && !bytes.Equal(alg.Params.FullBytes, derNull)) {
				return errors.New("a digest algorithm identifier is not an OID with absent or NULL parameters")
			}
		}
	}
	for _, a := range rawFull(sd.DigestAlgorithms) {
		found := false
		for _, b := range signers {
			found = found || bytes.Equal(a, b)
		}
		if !found {
			return errors.New("digestAlgorithms names an algorithm no signer uses")
		}
	}
	for _, b := range signers {
		found := false
		for _, a := range rawFull(sd.DigestAlgorithms) {
			found = found || bytes.Equal(a, b)
		}
		if !found {
			return errors.New("a signer's digest algorithm is not in digestAlgorithms")
		}
	}
	return nil
}

func rawFull(vs []asn1.RawValue) [][]byte {
	out := make([][]byte, len(vs))
	for i, v := range vs {
		out[i] = v.FullBytes
	}
	return out
}
