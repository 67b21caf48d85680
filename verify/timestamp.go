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
// §2.4.2) a granted time-stamp response carries: what a receipt holds in
// its timestamp_token member. The response is parsed and its signature
// checked as by [CheckTimestamp], without the certificate chain.
func TimestampToken(response []byte) ([]byte, error) {
	if len(response) == 0 || len(response) > MaxTimestampSize {
		return nil, fmt.Errorf("time-stamp response of %d bytes, want 1 to %d", len(response), MaxTimestampSize)
	}
	ts, err := timestamp.ParseResponse(response)
	if err != nil {
		return nil, fmt.Errorf("time-stamp response does not parse or verify: %w", err)
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
	// DER has one spelling: nothing may follow the token's one value.
	var outer asn1.RawValue
	if rest, err := asn1.Unmarshal(token, &outer); err != nil || len(rest) > 0 {
		return time.Time{}, errors.New("time-stamp token is not one DER value")
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
