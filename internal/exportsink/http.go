package exportsink

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/acsledger/acsledger/ledger/export"
)

// httpSink POSTs each batch as one NDJSON body. A 2xx answer acknowledges
// it; anything else is retried. The URL's userinfo becomes HTTP Basic
// credentials, its token query parameter a Bearer token (neither is ever
// logged). Idempotency-Key is the SHA-256 of the batch's entry hashes, so
// a receiver that sees the same batch twice after a restart can tell.
type httpSink struct {
	c      Config
	target string
	user   *url.Userinfo
	token  string
	client *http.Client
	body   bytes.Buffer
}

func newHTTP(c Config) *httpSink {
	u := *c.url
	s := &httpSink{c: c, user: u.User}
	q := u.Query()
	s.token = q.Get("token")
	for _, k := range []string{"token", "allow_tools", "allow_args", "ca", "cert", "key", "server_name"} {
		q.Del(k)
	}
	u.User, u.RawQuery = nil, q.Encode()
	s.target = u.String()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = c.tls
	s.client = &http.Client{Transport: tr}
	return s
}

func (s *httpSink) Send(ctx context.Context, batch []export.Event) error {
	s.body.Reset()
	h := sha256.New()
	for _, e := range batch {
		s.body.Write(e.JSON)
		s.body.WriteByte('\n')
		io.WriteString(h, e.EntryHash)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.target, bytes.NewReader(s.body.Bytes()))
	if err != nil {
		return fmt.Errorf("export sink %s: %w", s.c.Name, err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Idempotency-Key", hex.EncodeToString(h.Sum(nil)))
	if s.user != nil {
		pw, _ := s.user.Password()
		req.SetBasicAuth(s.user.Username(), pw)
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// *url.Error holds the request URL, which has no credentials
		// (they are in headers), but say only what failed.
		return fmt.Errorf("export sink %s: POST %s: %w", s.c.Name, s.c.Redacted, unwrapURL(err))
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("export sink %s: POST %s: %s", s.c.Name, s.c.Redacted, resp.Status)
	}
	return nil
}

func unwrapURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

func (s *httpSink) Close() error {
	s.client.CloseIdleConnections()
	return nil
}
