package exportsink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/acsledger/acsledger/ledger/export"
)

// syslogPEN is the enterprise number of the structured-data element the
// messages carry (acsledger@32473). 32473 is the number RFC 5612 reserves
// for documentation and examples; the element is for reading, no one
// registers it.
const syslogPEN = "32473"

// syslogPRI is facility 13 (log audit, RFC 5424 §6.2.1) at severity 6
// (informational): 13*8 + 6.
const syslogPRI = "<110>"

// syslogSink writes each event as one RFC 5424 message over TCP or TLS,
// framed by octet counting (RFC 6587 §3.4.1): "LEN SP MSG", no trailer,
// so an event may hold any byte. Plain syslog has no application
// acknowledgement: a write succeeds into a socket whose peer is already
// gone. So the sink is an export.UnconfirmedSink: its entries count as
// sent_unconfirmed, never acknowledged, and the Deliverer keeps a
// re-send window of what it wrote (?resend_window=, docs/export.md).
// Before each batch, and when the Deliverer checks, the sink looks
// whether the receiver closed the connection; if it did, the batch is
// not written and what the window holds is sent again on a new one.
type syslogSink struct {
	c      Config
	conn   net.Conn
	connID uint64 // counts the connections made
	msg    rfc5424
	buf    []byte
}

var _ export.UnconfirmedSink = (*syslogSink)(nil)

// defaultResendWindow is how long written entries stay in the re-send
// window once the connection was found open after them.
const defaultResendWindow = time.Minute

// syslogOptions are a syslog sink's own query parameters.
type syslogOptions struct {
	// resendWindow is how long written entries stay in the re-send window
	// once the connection was found open after them.
	resendWindow time.Duration
}

// parseResendWindow reads the ?resend_window=DURATION of a syslog sink
// (0s to 24h).
func (c *Config) parseResendWindow(q url.Values) error {
	c.syslog.resendWindow = defaultResendWindow
	v := q.Get("resend_window")
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > 24*time.Hour {
		return fmt.Errorf("resend_window=%q: want a duration from 0s to 24h, like 60s or 5m", v)
	}
	c.syslog.resendWindow = d
	return nil
}

func newSyslog(c Config) *syslogSink {
	return &syslogSink{c: c, msg: newRFC5424(c)}
}

// rfc5424 builds the RFC 5424 messages the syslog and RELP sinks send.
type rfc5424 struct {
	host, procID, msgID string
}

func newRFC5424(c Config) rfc5424 {
	host, err := os.Hostname()
	if err != nil || host == "" || len(host) > 255 {
		host = "-"
	}
	for i := range len(host) {
		if host[i] < 33 || host[i] > 126 { // RFC 5424 §6: PRINTUSASCII
			host = "-"
			break
		}
	}
	return rfc5424{host: host, procID: strconv.Itoa(os.Getpid()), msgID: string(c.Format)}
}

func (s *syslogSink) dial(ctx context.Context) error {
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	var conn net.Conn
	var err error
	if s.c.Kind == "syslog+tls" {
		td := tls.Dialer{NetDialer: &d, Config: s.c.tls}
		conn, err = td.DialContext(ctx, "tcp", s.c.url.Host)
	} else {
		conn, err = d.DialContext(ctx, "tcp", s.c.url.Host)
	}
	if err != nil {
		return fmt.Errorf("export sink %s: couldn't connect to %s: %w (%w)", s.c.Name, s.c.Redacted, err, export.ErrNotSent)
	}
	s.conn = conn
	s.connID++
	return nil
}

// alive reports whether the receiver still holds the connection open: a
// syslog receiver never writes, so a read that does not time out at once
// means it closed (EOF) or reset it.
func (s *syslogSink) alive() bool {
	if err := s.conn.SetReadDeadline(time.Now().Add(time.Millisecond)); err != nil {
		return false
	}
	var b [1]byte
	_, err := s.conn.Read(b[:])
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Conn implements export.UnconfirmedSink.
func (s *syslogSink) Conn() uint64 { return s.connID }

// ResendWindow implements export.UnconfirmedSink.
func (s *syslogSink) ResendWindow() time.Duration { return s.c.syslog.resendWindow }

// Check implements export.UnconfirmedSink: the connection is still open,
// or a new one could be made.
func (s *syslogSink) Check(ctx context.Context) error {
	if err := s.closedByPeer(); err != nil {
		return err
	}
	if s.conn == nil {
		return s.dial(ctx)
	}
	return nil
}

// closedByPeer drops a connection the receiver closed, with an error
// saying so.
func (s *syslogSink) closedByPeer() error {
	if s.conn == nil || s.alive() {
		return nil
	}
	s.conn.Close()
	s.conn = nil
	return fmt.Errorf("export sink %s: %s closed the connection; what was written to it is sent again (%w)", s.c.Name, s.c.Redacted, export.ErrNotSent)
}

func (s *syslogSink) Send(ctx context.Context, batch []export.Event) error {
	if err := s.closedByPeer(); err != nil {
		return err
	}
	if s.conn == nil {
		if err := s.dial(ctx); err != nil {
			return err
		}
	}
	s.buf = s.buf[:0]
	for _, e := range batch {
		s.buf = s.msg.appendCounted(s.buf, e)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	s.conn.SetWriteDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { s.conn.SetWriteDeadline(time.Unix(1, 0)) })
	_, err := s.conn.Write(s.buf)
	stop()
	if err != nil {
		s.conn.Close()
		s.conn = nil
		return fmt.Errorf("export sink %s: couldn't write to %s: %w", s.c.Name, s.c.Redacted, err)
	}
	return nil
}

// appendCounted appends e as one RFC 5424 message behind its length:
// LEN SP <PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID [SD] MSG. That
// is an octet-counted syslog frame (RFC 6587 §3.4.1) and, behind a txnr
// and a command, the "DATALEN SP DATA" of a RELP frame.
func (m *rfc5424) appendCounted(dst []byte, e export.Event) []byte {
	var hdr [512]byte
	msg := hdr[:0]
	msg = append(msg, syslogPRI+"1 "...)
	msg = e.RecordedAt.UTC().AppendFormat(msg, "2006-01-02T15:04:05.000000Z07:00")
	msg = append(msg, ' ')
	msg = append(msg, m.host...)
	msg = append(msg, " acsledger "...)
	msg = append(msg, m.procID...)
	msg = append(msg, ' ')
	msg = append(msg, m.msgID...)
	msg = append(msg, " [acsledger@"+syslogPEN+" session_id=\""...)
	msg = appendSDValue(msg, e.SessionID)
	msg = append(msg, "\" position=\""...)
	msg = strconv.AppendInt(msg, e.Position, 10)
	msg = append(msg, "\" entry_hash=\""...)
	msg = append(msg, e.EntryHash...)
	msg = append(msg, "\" cursor=\""...)
	msg = append(msg, e.Cursor...)
	msg = append(msg, "\"] "...)
	dst = strconv.AppendInt(dst, int64(len(msg)+len(e.JSON)), 10)
	dst = append(dst, ' ')
	dst = append(dst, msg...)
	return append(dst, e.JSON...)
}

// appendSDValue escapes a PARAM-VALUE (RFC 5424 §6.3.3): '"', '\' and ']'
// take a backslash.
func appendSDValue(dst []byte, v string) []byte {
	for i := range len(v) {
		switch v[i] {
		case '"', '\\', ']':
			dst = append(dst, '\\')
		}
		dst = append(dst, v[i])
	}
	return dst
}

func (s *syslogSink) Close() error {
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

var _ io.Closer = (*syslogSink)(nil)
