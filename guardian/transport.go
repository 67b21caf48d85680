package guardian

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"

	"github.com/acsledger/acsledger/acs/rpcerr"
)

// ServeHTTP serves the JSON-RPC endpoint (POST /acs, ACS §3): one request
// or a batch per body. Every JSON-RPC answer, error or not, is HTTP 200
// except a body over MaxBodyBytes, which is 413 with a -32600 body.
func (g *Guardian) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "the ACS endpoint accepts POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxBodyBytes))
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			_, _ = w.Write(g.tooLarge(r.Context()))
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(g.errorResponse(nullID, refuse(rpcerr.ParseError, "unreadable_body", "the request body could not be read: "+err.Error()), nil))
		return
	}
	transport := "http"
	if r.TLS != nil {
		transport = "https"
	}
	// An agent that traces passes its span context (W3C traceparent); the
	// request's span continues that trace when a propagator is installed.
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	_, _ = w.Write(g.serve(ctx, body, transport))
}

func (g *Guardian) tooLarge(ctx context.Context) []byte {
	return g.bodyError(ctx, refuse(rpcerr.InvalidRequest, "body_too_large",
		fmt.Sprintf("the request is larger than this Guardian's limit of %d bytes", g.cfg.MaxBodyBytes),
		"max_body_bytes", g.cfg.MaxBodyBytes))
}

// ServeStdio serves JSON-RPC over a byte stream with Content-Length framing
// (ACS §3): each message is a header block ("Content-Length: N", optional
// "Content-Type", each line ending in CRLF, then an empty line) followed by
// N bytes of UTF-8 JSON. Answers are framed the same way, one per message,
// in order. A frame over MaxBodyBytes is skipped and answered with -32600.
//
// ServeStdio returns nil when r ends between messages, ctx.Err() when ctx
// is done, and an error when the framing is broken (a header without
// Content-Length, a truncated body): after that no message boundary can be
// trusted, so it answers -32700 once and stops.
func (g *Guardian) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	br := bufio.NewReader(r)
	tp := textproto.NewReader(br)
	bw := bufio.NewWriter(w)
	write := func(msg []byte) error {
		if _, err := fmt.Fprintf(bw, "Content-Length: %d\r\n\r\n", len(msg)); err != nil {
			return err
		}
		if _, err := bw.Write(msg); err != nil {
			return err
		}
		return bw.Flush()
	}
	fail := func(err error) error {
		_ = write(g.errorResponse(nullID, refuse(rpcerr.ParseError, "bad_framing", err.Error()), nil))
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := br.Peek(1); err == io.EOF {
			return nil
		}
		hdr, err := tp.ReadMIMEHeader()
		if err != nil {
			if errors.Is(err, io.EOF) && len(hdr) == 0 {
				return nil
			}
			return fail(fmt.Errorf("stdio: couldn't read the message header: %w", err))
		}
		cl := hdr.Get("Content-Length")
		if cl == "" {
			return fail(errors.New("stdio: message header has no Content-Length"))
		}
		n, err := strconv.ParseInt(strings.TrimSpace(cl), 10, 64)
		if err != nil || n < 0 {
			return fail(fmt.Errorf("stdio: Content-Length %q is not a byte count", cl))
		}
		if n > g.cfg.MaxBodyBytes {
			if _, err := io.CopyN(io.Discard, br, n); err != nil {
				return fail(fmt.Errorf("stdio: message body ends after fewer than %d bytes: %w", n, err))
			}
			if err := write(g.tooLarge(ctx)); err != nil {
				return fmt.Errorf("stdio: couldn't write: %w", err)
			}
			continue
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return fail(fmt.Errorf("stdio: message body ends after fewer than %d bytes: %w", n, err))
		}
		if err := write(g.serve(ctx, body, "stdio")); err != nil {
			return fmt.Errorf("stdio: couldn't write: %w", err)
		}
	}
}
