// Package exportsink holds the push sinks of export (docs/export.md): the
// receivers compliance teams already run, fed through ledger/export's
// durable cursors. Each sink takes one batch at a time and returns only
// once the receiver has it:
//
//   - syslog+tcp://HOST:PORT, syslog+tls://HOST:PORT: RFC 5424 messages,
//     the event JSON as MSG, framed by octet counting (RFC 6587 §3.4.1);
//   - relp://HOST:PORT, relp+tls://HOST:PORT: the same messages over RELP,
//     each acknowledged by the receiver (relp.go);
//   - http://..., https://...: NDJSON batches by POST;
//   - otlp+http://HOST:PORT[/PATH]: OTLP/HTTP logs through OpenTelemetry's
//     own log exporter (otlploghttp), the event JSON as the body;
//   - hec+https://HOST:PORT?token=T: Splunk's HTTP Event Collector, each
//     batch counted only once the indexer acknowledged it (hec.go);
//   - file:///DIR: size-rotated NDJSON files for Fluent Bit or Vector.
//
// [RFC 5424]: https://www.rfc-editor.org/rfc/rfc5424
// [RFC 6587]: https://www.rfc-editor.org/rfc/rfc6587
package exportsink

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/acsledger/acsledger/acs/trace"
	"github.com/acsledger/acsledger/ledger/export"
)

// Config is one parsed --export sink.
type Config struct {
	Name   string
	Kind   string // a key of schemes: syslog+tcp, relp, https, hec+https, file, ...
	Format trace.Format
	// Redacted is the URL without userinfo and with every query value
	// masked but those of public parameters: what logs, errors and
	// /api/v1/exports may show.
	Redacted string
	url      *url.URL
	// Options say what of the params may leave (allow_tools,
	// allow_args query parameters).
	Options trace.Options
	tls     *tls.Config
	// file sink
	dir      string
	maxBytes int64
	// parquet sinks (parquet.go)
	parquet *parquetConfig
	// relp sink: the most frames awaiting their rsp
	window int
	// syslog sink (syslog.go)
	syslog syslogOptions
	// hec sink
	hec hecConfig
}

// String is the redacted URL, so a Config printed or logged by mistake
// shows no secret.
func (c Config) String() string { return c.Name + "=" + c.Redacted }

// scheme is what one --export URL scheme takes.
type scheme struct {
	// tls: the scheme speaks TLS and takes tlsParams.
	tls bool
	// userinfo: the scheme takes USER:PASSWORD@ (HTTP Basic).
	userinfo bool
	// port: HOST:PORT must name the port.
	port bool
	// local: the URL names a directory (file:///DIR), not a host.
	local bool
	// params are the query parameters the scheme takes besides
	// commonParams and, for TLS, tlsParams.
	params []string
}

// schemes are the sinks --export takes, one line each. A query parameter
// that the scheme does not list stops serve (exit 2), so a misspelling
// (?cafile= for ?ca=) never passes silently. A parameter's value shows in
// messages only when the parameter is listed here and isSecret is false.
var schemes = map[string]scheme{
	"syslog+tcp": {port: true, params: []string{"resend_window"}},
	"syslog+tls": {tls: true, port: true, params: []string{"resend_window"}},
	"relp":       {port: true, params: []string{"window"}},
	"relp+tls":   {tls: true, port: true, params: []string{"window"}},
	"http":       {userinfo: true, params: []string{"token"}},
	"https":      {tls: true, userinfo: true, params: []string{"token"}},
	"otlp+http":  {port: true, params: []string{"token"}},
	"otlp+https": {tls: true, port: true, params: []string{"token"}},
	"hec+http":   {port: true, params: hecParams},
	"hec+https":  {tls: true, port: true, params: hecParams},
	"file":       {local: true, params: []string{"max_bytes"}},
	// parquet.go checks its host, bucket, credentials and TLS itself.
	"parquet":         {local: true, params: parquetParams},
	"parquet+s3":      {userinfo: true, params: parquetParams},
	"parquet+s3+http": {userinfo: true, params: parquetParams},
}

var (
	commonParams = []string{"allow_tools", "allow_args"}
	tlsParams    = []string{"ca", "cert", "key", "server_name"}
)

// secretParams are query parameters whose values never appear in logs or
// messages; isSecret also catches names that look like one.
var secretParams = map[string]bool{"token": true, "password": true, "key_password": true}

var secretLike = regexp.MustCompile(`(?i)token|secret|passw|pwd|credential|auth|api_?key|access_?key|private|session|signature`)

func isSecret(param string) bool { return secretParams[param] || secretLike.MatchString(param) }

// isPublic says whether a raw query parameter name is one some scheme
// takes and is not a secret: only such values show in messages.
func isPublic(param string) bool {
	if isSecret(param) {
		return false
	}
	if slices.Contains(commonParams, param) || slices.Contains(tlsParams, param) {
		return true
	}
	for _, s := range schemes {
		if slices.Contains(s.params, param) {
			return true
		}
	}
	return false
}

func schemeNames() string {
	var out []string
	for k := range schemes {
		out = append(out, k)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

var (
	nameRE      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	paramNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,40}$`)
)

// ParseFlag splits a --export value NAME=URL.
func ParseFlag(v string) (name, rawURL string, err error) {
	name, rawURL, ok := strings.Cut(v, "=")
	if !ok || !nameRE.MatchString(name) || rawURL == "" {
		return "", "", fmt.Errorf("--export %s: want NAME=URL, NAME of letters, digits, '.', '_' or '-' (at most 64)", redactFlag(v))
	}
	return name, rawURL, nil
}

// redactFlag masks a NAME=URL value for a message. When NAME is not a
// name the '=' may be the query's, so the whole value is masked as a URL.
func redactFlag(v string) string {
	name, raw, ok := strings.Cut(v, "=")
	if ok && nameRE.MatchString(name) {
		return name + "=" + redactRaw(raw)
	}
	return redactRaw(v)
}

// Redact is u without its userinfo and with every query value masked but
// those of public parameters.
func Redact(u *url.URL) string { return redactRaw(u.String()) }

const masked = "REDACTED"

// redactRaw masks what may be secret in a --export URL, working on the
// text so that a value url.Parse refuses is masked the same way:
// everything up to the last '@' but a known scheme (a password may hold
// '/', '?' or '#' unescaped), the value of every query parameter that is
// not public, any fragment, and control characters.
func redactRaw(s string) string {
	var b strings.Builder
	inQuery := false
	if at := strings.LastIndex(s, "@"); at >= 0 {
		pre := s[:at]
		sch, _, ok := strings.Cut(pre, ":")
		if _, known := schemes[strings.ToLower(sch)]; ok && known {
			keep := len(sch) + 1
			if strings.HasPrefix(pre[keep:], "//") {
				keep += 2
			}
			b.WriteString(pre[:keep])
		}
		b.WriteString(masked + "@")
		s = s[at+1:]
		// The '@' may have been in the query or the fragment: what
		// follows it is then still in there.
		switch {
		case strings.Contains(pre, "#"):
			if s != "" {
				b.WriteString(masked)
			}
			return oneLine(b.String())
		case strings.Contains(pre, "?"):
			inQuery = true
		}
	}
	s, frag, hasFrag := strings.Cut(s, "#")
	if !inQuery {
		var query string
		var hasQuery bool
		s, query, hasQuery = strings.Cut(s, "?")
		b.WriteString(s)
		if hasQuery {
			b.WriteByte('?')
		}
		s, inQuery = query, hasQuery
	}
	if inQuery {
		for i, part := range strings.Split(s, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			k, _, hasValue := strings.Cut(part, "=")
			switch {
			case isPublic(k):
				b.WriteString(part)
			case hasValue:
				b.WriteString(k + "=" + masked)
			case part != "":
				b.WriteString(masked)
			}
		}
	}
	if hasFrag && frag != "" {
		b.WriteString("#" + masked)
	}
	return oneLine(b.String())
}

// oneLine replaces control characters, so a message stays one line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

// urlProblem says what url.Parse found wrong without its message, which
// quotes the URL and with it any password.
func urlProblem(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "invalid port"):
		return "the port is not a number from 1 to 65535"
	case strings.Contains(msg, "invalid userinfo"):
		return "the user or password holds a character that must be %-escaped"
	case strings.Contains(msg, "invalid URL escape"):
		return "a bad %-escape"
	case strings.Contains(msg, "invalid character") && strings.Contains(msg, "host"):
		return "the host holds a character a host name cannot"
	case strings.Contains(msg, "control character"):
		return "a control character"
	case strings.Contains(msg, "missing protocol scheme"), strings.Contains(msg, "first path segment"):
		return "no scheme (want SCHEME://HOST:PORT)"
	}
	return "it does not parse"
}

// Parse checks one sink: its URL, its format ("" is ocsf) and the files
// its TLS options name, which are read now, so that a bad sink stops serve
// at start (exit 2). Errors name the flag and the parameter, and never
// hold a password, a token or another secret parameter's value.
func Parse(name, rawURL, format string) (Config, error) {
	c := Config{Name: name}
	flag := "--export " + name
	if !nameRE.MatchString(name) {
		return c, fmt.Errorf("--export %q: the name must be letters, digits, '.', '_' or '-' (at most 64)", redactRaw(name))
	}
	f, err := trace.ParseFormat(format)
	if err != nil {
		return c, fmt.Errorf("--export-format %s: %w", name, err)
	}
	c.Format = f
	c.Redacted = redactRaw(rawURL)
	u, err := url.Parse(rawURL)
	if err != nil {
		return c, fmt.Errorf("%s (%s): not a URL: %s", flag, c.Redacted, urlProblem(err))
	}
	c.url = u
	c.Kind = u.Scheme
	sch, ok := schemes[c.Kind]
	switch {
	case c.Kind == "":
		return c, fmt.Errorf("%s (%s): no scheme (want one of %s)", flag, c.Redacted, schemeNames())
	case !ok && strings.HasPrefix(strings.ToLower(c.Redacted), c.Kind+":"):
		return c, fmt.Errorf("%s (%s): unknown scheme %q (want one of %s)", flag, c.Redacted, c.Kind, schemeNames())
	case !ok:
		return c, fmt.Errorf("%s (%s): unknown scheme (want one of %s)", flag, c.Redacted, schemeNames())
	}
	fail := func(err error) (Config, error) {
		return c, fmt.Errorf("%s (%s): %w", flag, c.Redacted, err)
	}
	q, err := checkQuery(c.Kind, sch, u)
	if err != nil {
		return fail(err)
	}
	if err := c.parseAllow(q); err != nil {
		return fail(err)
	}
	if u.User != nil && !sch.userinfo {
		return fail(fmt.Errorf("%s takes no user or password in the URL", c.Kind))
	}
	if !sch.local {
		if err := checkHost(c.Kind, sch, u); err != nil {
			return fail(err)
		}
	}
	switch c.Kind {
	case "syslog+tcp", "syslog+tls":
		if err := c.parseResendWindow(q); err != nil {
			return fail(err)
		}
	case "relp", "relp+tls":
		if err := c.parseRELP(q); err != nil {
			return fail(err)
		}
	case "hec+http", "hec+https":
		if err := c.parseHEC(u, q); err != nil {
			return fail(err)
		}
	case "parquet", "parquet+s3", "parquet+s3+http":
		if err := c.parseParquet(u, q); err != nil {
			return fail(err)
		}
	case "file":
		if u.Host != "" && u.Host != "localhost" || u.Path == "" {
			return fail(errors.New("want file:///ABSOLUTE/DIR"))
		}
		c.dir = filepath.Clean(u.Path)
		c.maxBytes = 64 << 20
		if v := q.Get("max_bytes"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 4096 {
				return fail(fmt.Errorf("max_bytes=%q: want a number of bytes, at least 4096", v))
			}
			c.maxBytes = n
		}
		if err := os.MkdirAll(c.dir, 0o750); err != nil {
			return c, fmt.Errorf("%s: couldn't create the directory: %w", flag, err)
		}
	}
	if sch.tls {
		tc, err := tlsConfig(u, q)
		if err != nil {
			return fail(err)
		}
		c.tls = tc
	}
	return c, nil
}

// checkQuery parses u's query strictly: every parameter one the scheme
// takes, each given once, and no fragment.
func checkQuery(kind string, sch scheme, u *url.URL) (url.Values, error) {
	if u.Fragment != "" {
		return nil, errors.New("a #fragment means nothing here (a password or token with '#' must be %-escaped as %23)")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, errors.New("the query does not parse (a bad %-escape, or ';' between parameters)")
	}
	takes := slices.Concat(commonParams, sch.params)
	if sch.tls {
		takes = append(takes, tlsParams...)
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		// A name is shown only when it could be one: a password with an
		// unescaped '?' before it makes the rest of the URL a "name".
		name := strconv.Quote(k)
		if !paramNameRE.MatchString(k) {
			name = "(its name is not shown: it holds characters no parameter name has)"
		}
		switch {
		case k == "":
			return nil, errors.New("a query parameter without a name")
		case !slices.Contains(takes, k) && slices.Contains(tlsParams, k):
			return nil, fmt.Errorf("parameter %s: %s does not speak TLS", k, kind)
		case !slices.Contains(takes, k):
			hint := ""
			if near := nearest(k, takes); near != "" {
				hint = fmt.Sprintf("; did you mean %s?", near)
			}
			return nil, fmt.Errorf("unknown parameter %s for %s (it takes %s%s)", name, kind, strings.Join(takes, ", "), hint)
		case len(q[k]) > 1:
			return nil, fmt.Errorf("parameter %s is given %d times", k, len(q[k]))
		}
	}
	return q, nil
}

// nearest is the name of want closest to k by edit distance, if close.
func nearest(k string, want []string) string {
	best, bestD := "", 3
	for _, w := range want {
		d := editDistance(k, w)
		if len(w) > 1 && (strings.HasPrefix(k, w) || strings.HasPrefix(w, k)) {
			d = min(d, 2)
		}
		if d < bestD {
			best, bestD = w, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// checkHost checks the authority of a network sink: a host, and a port
// from 1 to 65535 (required when the scheme has no default).
func checkHost(kind string, sch scheme, u *url.URL) error {
	if u.Opaque != "" || u.Host == "" {
		return fmt.Errorf("want %s://HOST:PORT", kind)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("want %s://HOST:PORT: the host is empty", kind)
	}
	port := u.Port()
	switch {
	case port == "" && strings.HasSuffix(u.Host, ":"):
		return fmt.Errorf("the port after %q is empty", u.Hostname())
	case port == "" && sch.port:
		return fmt.Errorf("want %s://HOST:PORT with a port", kind)
	case port == "":
		return nil
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %s: want a number from 1 to 65535", port)
	}
	return nil
}

func (c *Config) parseAllow(q url.Values) error {
	switch v := q.Get("allow_tools"); v {
	case "", "0", "false":
	case "1", "true":
		c.Options.AllowTools = true
	default:
		return fmt.Errorf("allow_tools=%q: want true or false", v)
	}
	if v := q.Get("allow_args"); v != "" {
		for _, k := range strings.Split(v, ",") {
			if k == "" {
				return fmt.Errorf("allow_args=%q: an empty key", v)
			}
			c.Options.AllowArgKeys = append(c.Options.AllowArgKeys, k)
		}
	}
	return nil
}

// tlsConfig reads the TLS files the URL's query names: ca (PEM roots that
// replace the system's), cert and key (a client certificate), and takes
// server_name. Its errors name the parameter.
func tlsConfig(u *url.URL, q url.Values) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.Hostname()}
	if v := q.Get("server_name"); v != "" {
		tc.ServerName = v
	}
	if ca := q.Get("ca"); ca != "" {
		pem, err := readSmall(ca, 8<<20)
		if err != nil {
			return nil, fmt.Errorf("ca=%s: couldn't read the CA file: %w", ca, unwrapPath(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca=%s: the CA file holds no PEM certificate", ca)
		}
		tc.RootCAs = pool
	}
	cert, key := q.Get("cert"), q.Get("key")
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("cert and key go together")
	}
	if cert != "" {
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("cert=%s, key=%s: couldn't load the client certificate: %w", cert, key, unwrapPath(err))
		}
		tc.Certificates = []tls.Certificate{kp}
	}
	return tc, nil
}

// readSmall reads a file of at most limit bytes (a CA bundle is a few
// hundred KiB; ca=/dev/zero must not read for ever).
func readSmall(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("bigger than %d MiB", limit>>20)
	}
	return b, err
}

// unwrapPath drops the path a *fs.PathError repeats (the message names
// the parameter and its file already).
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Open returns the sink c configures. It does not connect: a receiver
// that is down makes the first Send fail, and delivery retries.
func Open(c Config) (export.Sink, error) {
	switch c.Kind {
	case "syslog+tcp", "syslog+tls":
		return newSyslog(c), nil
	case "relp", "relp+tls":
		return newRELP(c), nil
	case "http", "https":
		return newHTTP(c), nil
	case "otlp+http", "otlp+https":
		return newOTLP(c)
	case "hec+http", "hec+https":
		return newHEC(c)
	case "parquet", "parquet+s3", "parquet+s3+http":
		return newParquet(c)
	case "file":
		return newFile(c)
	}
	return nil, fmt.Errorf("export sink %s: unknown kind %q", c.Name, c.Kind)
}
