// Package tsa asks an [RFC 3161] time-stamping authority (TSA) to stamp
// every signed checkpoint of the Merkle log and keeps the responses beside
// the checkpoints (migration 0017), so the time a tree existed by rests on
// a clock the log's operator does not hold. An authority that is down
// never stops the log: checkpoints go out unstamped and the [Stamper]
// stamps them, oldest first, once it answers again.
//
// The protocol objects are built and parsed by github.com/digitorus/timestamp;
// the checks of a response are verify.CheckTimestamp, the same code an
// auditor runs offline.
//
// [RFC 3161]: https://www.rfc-editor.org/rfc/rfc3161
package tsa

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/big"
	"mime"
	"net/http"
	"time"

	"github.com/digitorus/timestamp"

	"github.com/acsledger/acsledger/verify"
)

// Client is one time-stamping authority reached over HTTP (RFC 3161 §3.4:
// POST application/timestamp-query, answer application/timestamp-reply).
type Client struct {
	url   string
	hc    *http.Client
	roots *x509.CertPool
}

// NewClient returns a client of the TSA at url. roots, if not nil, are the
// TSA certificates its responses must chain to (serve --tsa-cert); a
// response that does not is refused and the checkpoint stays unstamped.
// hc nil means a client with a 10 s timeout.
func NewClient(url string, roots *x509.CertPool, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return &Client{url: url, hc: hc, roots: roots}
}

// URL returns the authority's URL (never holding secrets: serve refuses
// user information in it).
func (c *Client) URL() string { return c.url }

// Stamp asks the authority to stamp the signed checkpoint note and returns
// its TimeStampResp (DER), checked: granted, for this checkpoint's
// imprint, with our nonce, signed (and chained to the configured roots).
func (c *Client) Stamp(ctx context.Context, signed []byte) ([]byte, error) {
	imprint, err := verify.TimestampImprint(signed)
	if err != nil {
		return nil, err
	}
	nonce, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 63))
	if err != nil {
		return nil, err
	}
	// RFC 3161 §2.4.1: certReq true, so the token carries the signer's
	// certificate and an auditor needs only the TSA's root to check it.
	req := timestamp.Request{HashAlgorithm: crypto.SHA256, HashedMessage: imprint[:], Certificates: true, Nonce: nonce}
	body, err := req.Marshal()
	if err != nil {
		return nil, fmt.Errorf("couldn't encode the time-stamp request: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/timestamp-query")
	resp, err := c.hc.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, verify.MaxTimestampSize+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("TSA answered %s", resp.Status)
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/timestamp-reply" {
		return nil, fmt.Errorf("TSA answered Content-Type %q, want application/timestamp-reply", resp.Header.Get("Content-Type"))
	}
	if len(b) > verify.MaxTimestampSize {
		return nil, fmt.Errorf("TSA response is over %d bytes", verify.MaxTimestampSize)
	}
	if _, err := verify.CheckTimestamp(b, signed, c.roots); err != nil {
		return nil, err
	}
	ts, err := timestamp.ParseResponse(b)
	if err != nil {
		return nil, err
	}
	if ts.Nonce == nil || ts.Nonce.Cmp(nonce) != 0 {
		return nil, errors.New("TSA response does not carry the request's nonce")
	}
	return b, nil
}
