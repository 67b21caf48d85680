package exportsink

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/acsledger/acsledger/ledger/export"
)

// RELP, the Reliable Event Logging Protocol of rsyslog's imrelp and
// librelp (https://www.rsyslog.com/doc/relp.html), written here from the
// protocol text: no Go client library is kept up for it.
//
// A frame is TXNR SP COMMAND SP DATALEN [SP DATA] LF. The client opens a
// session with "open", offering relp_version, relp_software and the
// commands it will send; the server answers with an "rsp" whose DATA
// starts with a status ("200 OK") and carries its own offers. Each event
// is then one "syslog" command under its own transaction number, 1 to
// 999999999 and then 1 again, which the server acknowledges with
// "TXNR rsp 6 200 OK" once it has taken the message; "close" ends the
// session, and a server that goes away first may say "0 serverclose 0".
const (
	relpMaxTxnr       = 999_999_999
	relpDefaultWindow = 1024
	relpMaxWindow     = 65536
	// relpMaxData bounds the DATA of a frame the receiver sends: an rsp
	// is a status and a few offers.
	relpMaxData = 64 << 10
	// relpFlush is how much of a batch is built before it is written.
	relpFlush = 64 << 10
	// relpOffers are what this client offers in "open".
	relpOffers = "relp_version=0\nrelp_software=acsledger\ncommands=syslog"
)

// relpSink sends each event as one RFC 5424 message in a RELP "syslog"
// command (the message syslogSink sends, without its octet count, which
// is RELP's DATALEN). A batch goes out pipelined: up to window commands
// await their rsp at once, and Send returns nil only when every command
// of the batch was answered "200". Anything else (a lost connection, the
// deadline, a refusal, a serverclose) closes the session and fails the
// whole batch, which delivery sends again on a new session; the receiver
// may then hold some events twice and de-duplicates on the entry hash.
type relpSink struct {
	c    Config
	msg  rfc5424
	conn net.Conn
	r    *bufio.Reader
	// tcp is the TCP connection under conn, for quickAck (nil when it
	// cannot be had).
	tcp syscall.RawConn
	// txnr is the transaction number last sent on conn.
	txnr int
	wbuf []byte
	// data is the DATA of the frame last read.
	data  []byte
	acked []bool
}

func newRELP(c Config) *relpSink {
	if c.window <= 0 {
		c.window = relpDefaultWindow
	}
	return &relpSink{c: c, msg: newRFC5424(c)}
}

// parseRELP takes the relp schemes' own query parameter: window, the most
// commands awaiting their rsp (default 1024).
func (c *Config) parseRELP(q url.Values) error {
	c.window = relpDefaultWindow
	if v := q.Get("window"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > relpMaxWindow {
			return fmt.Errorf("window=%q: want a number of frames from 1 to %d", v, relpMaxWindow)
		}
		c.window = n
	}
	return nil
}

func nextTxnr(t int) int { return t%relpMaxTxnr + 1 }

func (s *relpSink) Send(ctx context.Context, batch []export.Event) error {
	if len(batch) == 0 {
		return nil
	}
	if s.conn != nil && !s.idle() {
		s.drop()
	}
	fresh := s.conn == nil
	if fresh {
		if err := s.dial(ctx); err != nil {
			return err
		}
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	conn := s.conn
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	err := error(nil)
	if fresh {
		if err = s.open(); err != nil {
			err = fmt.Errorf("%w: %w", err, export.ErrNotSent)
		}
	}
	if err == nil {
		err = s.exchange(batch)
	}
	if !stop() {
		// ctx ended during the exchange: the connection's deadline is
		// past, or is about to be.
		s.drop()
	}
	if err != nil {
		s.drop()
		return fmt.Errorf("export sink %s: RELP to %s: %w", s.c.Name, s.c.Redacted, err)
	}
	return nil
}

func (s *relpSink) dial(ctx context.Context) error {
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", s.c.url.Host)
	if err != nil {
		return fmt.Errorf("export sink %s: couldn't connect to %s: %w", s.c.Name, s.c.Redacted, err)
	}
	s.tcp = nil
	if tc, ok := conn.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			s.tcp = rc
		}
	}
	if s.c.Kind == "relp+tls" {
		cfg := s.c.tls
		if cfg.ServerName == "" {
			cfg = cfg.Clone()
			cfg.ServerName = s.c.url.Hostname()
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return fmt.Errorf("export sink %s: TLS with %s: %w: %w", s.c.Name, s.c.Redacted, err, export.ErrNotSent)
		}
		conn = tc
	}
	s.conn, s.r, s.txnr = conn, bufio.NewReaderSize(conn, 16<<10), 0
	return nil
}

// drop closes the connection without a "close": what it had not
// acknowledged is sent again on the next.
func (s *relpSink) drop() {
	if s.conn != nil {
		s.conn.Close()
		s.conn, s.r = nil, nil
	}
}

// idle reports whether the session is still open and quiet: a server
// only speaks when asked, so anything to read (a serverclose, EOF, a
// reset) means it ended the session while no batch was under way. The
// socket is asked first, which costs no wait; over TLS, bytes waiting
// there may be a TLS message rather than RELP, so then, as where the
// socket cannot be asked, a read with a 1 ms deadline decides.
func (s *relpSink) idle() bool {
	if s.r.Buffered() > 0 {
		return false
	}
	if s.tcp != nil {
		if spoke, ok := peerSpoke(s.tcp); ok && (!spoke || s.c.Kind == "relp") {
			return !spoke
		}
	}
	if err := s.conn.SetReadDeadline(time.Now().Add(time.Millisecond)); err != nil {
		return false
	}
	_, err := s.r.Peek(1)
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// open starts the session with txnr 1 and checks that the server takes
// the syslog command.
func (s *relpSink) open() error {
	s.wbuf = appendRELPFrame(s.wbuf[:0], 1, "open", relpOffers)
	if _, err := s.conn.Write(s.wbuf); err != nil {
		return fmt.Errorf("couldn't open the session: %w", err)
	}
	f, err := s.readFrame()
	if err != nil {
		return fmt.Errorf("no answer to open: %w", err)
	}
	if f.cmd != relpRsp || f.txnr != 1 {
		return fmt.Errorf("open was answered by %s txnr %d, not an rsp", f.cmd, f.txnr)
	}
	if !rspOK(s.data) {
		return fmt.Errorf("the receiver refused the session: %q", printable(s.data))
	}
	if !offersSyslog(s.data) {
		return fmt.Errorf("the receiver does not take the syslog command: %q", printable(s.data))
	}
	s.txnr = 1
	return nil
}

// offersSyslog reports whether an open's rsp (a status line, then one
// offer a line) lists syslog among its commands.
func offersSyslog(rsp []byte) bool {
	for _, line := range bytes.Split(rsp, []byte("\n"))[1:] {
		if cmds, ok := bytes.CutPrefix(line, []byte("commands=")); ok {
			for _, c := range bytes.Split(cmds, []byte(",")) {
				if string(c) == "syslog" {
					return true
				}
			}
		}
	}
	return false
}

// errAborted stops the writer when the reader has ended early; the
// reader's error says why.
var errAborted = errors.New("aborted")

// exchange sends batch as syslog commands and waits for every rsp. The
// writer runs here and the reader beside it, so a receiver that answers
// while the batch is still being written is read at once.
func (s *relpSink) exchange(batch []export.Event) error {
	n := len(batch)
	first := nextTxnr(s.txnr)
	slots := make(chan struct{}, min(s.c.window, n))
	done := make(chan struct{})
	rerr := make(chan error, 1)
	conn := s.conn
	go func() {
		defer close(done)
		err := s.readAcks(first, n, slots)
		if err != nil {
			conn.Close() // unblocks a writer stuck on a full socket
		}
		rerr <- err
	}()
	werr := s.writeFrames(batch, slots, done)
	if werr != nil && werr != errAborted {
		conn.Close()
	}
	if err := <-rerr; err != nil {
		return err
	}
	return werr
}

// writeFrames writes one syslog command per event, taking a slot of the
// window for each; what is built is written whenever the window is full
// or relpFlush bytes are waiting.
func (s *relpSink) writeFrames(batch []export.Event, slots chan<- struct{}, done <-chan struct{}) error {
	buf := s.wbuf[:0]
	txnr := s.txnr
	write := func() error {
		if len(buf) == 0 {
			return nil
		}
		_, err := s.conn.Write(buf)
		buf = buf[:0]
		if err != nil {
			return fmt.Errorf("couldn't write: %w", err)
		}
		return nil
	}
	for _, e := range batch {
		select {
		case slots <- struct{}{}:
		default:
			if err := write(); err != nil {
				return err
			}
			select {
			case slots <- struct{}{}:
			case <-done:
				return errAborted
			}
		}
		txnr = nextTxnr(txnr)
		buf = strconv.AppendInt(buf, int64(txnr), 10)
		buf = append(buf, " syslog "...)
		buf = s.msg.appendCounted(buf, e)
		buf = append(buf, '\n')
		if len(buf) >= relpFlush {
			if err := write(); err != nil {
				return err
			}
		}
	}
	err := write()
	s.wbuf, s.txnr = buf, txnr
	return err
}

// readAcks reads the rsp of each of the n commands from txnr first on,
// in any order, and frees a slot of the window for each.
func (s *relpSink) readAcks(first, n int, slots <-chan struct{}) error {
	if cap(s.acked) < n {
		s.acked = make([]bool, n)
	}
	acked := s.acked[:n]
	clear(acked)
	for got := 0; got < n; got++ {
		if s.r.Buffered() == 0 && s.tcp != nil {
			// librelp writes each rsp as it goes, with Nagle's algorithm
			// on: the last rsp's of a batch wait for the ACK of the
			// earlier ones, which Linux delays up to 40 ms when it has
			// nothing to send back. A batch of 100 took 45 ms that way
			// (2,000 events/s); with the ACK asked for at once, 24,000.
			quickAck(s.tcp)
		}
		f, err := s.readFrame()
		if err != nil {
			return fmt.Errorf("%d of %d events unacknowledged: %w", n-got, n, err)
		}
		switch f.cmd {
		case relpRsp:
		case relpServerClose:
			return fmt.Errorf("the receiver closed the session (serverclose) with %d of %d events unacknowledged", n-got, n)
		default:
			return fmt.Errorf("the receiver sent %s txnr %d, not an rsp", f.cmd, f.txnr)
		}
		i := f.txnr - first
		if i < 0 {
			i += relpMaxTxnr
		}
		if i >= n || acked[i] {
			return fmt.Errorf("an rsp for txnr %d, which awaits none", f.txnr)
		}
		if !rspOK(s.data) {
			return fmt.Errorf("the receiver refused txnr %d: %q", f.txnr, printable(s.data))
		}
		acked[i] = true
		<-slots
	}
	return nil
}

// relpCmd is a command a client reads.
type relpCmd int

const (
	relpOther relpCmd = iota
	relpRsp
	relpServerClose
)

func (c relpCmd) String() string {
	switch c {
	case relpRsp:
		return "rsp"
	case relpServerClose:
		return "serverclose"
	}
	return "an unknown command"
}

type relpFrame struct {
	txnr int
	cmd  relpCmd
}

// readFrame reads one frame; its DATA is left in s.data.
func (s *relpSink) readFrame() (relpFrame, error) {
	var f relpFrame
	txnr, _, err := s.readNumber(" ")
	if err != nil {
		return f, fmt.Errorf("bad TXNR: %w", err)
	}
	if txnr > relpMaxTxnr {
		return f, fmt.Errorf("TXNR %d is over %d", txnr, relpMaxTxnr)
	}
	f.txnr = txnr
	cmd, err := s.r.ReadSlice(' ')
	if err != nil {
		return f, fmt.Errorf("bad COMMAND: %w", err)
	}
	switch string(cmd[:len(cmd)-1]) {
	case "rsp":
		f.cmd = relpRsp
	case "serverclose":
		f.cmd = relpServerClose
	}
	n, delim, err := s.readNumber(" \n")
	if err != nil {
		return f, fmt.Errorf("bad DATALEN: %w", err)
	}
	if n > relpMaxData {
		return f, fmt.Errorf("DATALEN %d is over %d", n, relpMaxData)
	}
	if cap(s.data) < n {
		s.data = make([]byte, n)
	}
	s.data = s.data[:n]
	if delim == '\n' {
		if n != 0 {
			return f, fmt.Errorf("DATALEN %d without DATA", n)
		}
		return f, nil
	}
	if _, err := io.ReadFull(s.r, s.data); err != nil {
		return f, fmt.Errorf("short DATA: %w", err)
	}
	if b, err := s.r.ReadByte(); err != nil || b != '\n' {
		return f, fmt.Errorf("a frame that does not end in LF (%v)", err)
	}
	return f, nil
}

// readNumber reads at most nine digits up to one of the delimiters.
func (s *relpSink) readNumber(delims string) (int, byte, error) {
	n := 0
	for digits := 0; ; digits++ {
		b, err := s.r.ReadByte()
		if err != nil {
			return 0, 0, err
		}
		switch {
		case b >= '0' && b <= '9' && digits < 9:
			n = n*10 + int(b-'0')
		case digits > 0 && bytes.IndexByte([]byte(delims), b) >= 0:
			return n, b, nil
		default:
			return 0, 0, fmt.Errorf("unexpected byte %q", b)
		}
	}
}

// rspOK reports whether an rsp's DATA starts with status 200.
func rspOK(data []byte) bool {
	return len(data) >= 3 && string(data[:3]) == "200" && (len(data) == 3 || data[3] == ' ' || data[3] == '\n')
}

// printable is a receiver's text as an error may show it: its first
// line, at most 100 bytes.
func printable(b []byte) string {
	b, _, _ = bytes.Cut(b, []byte("\n"))
	return string(b[:min(len(b), 100)])
}

// appendRELPFrame appends a frame with a DATA of its own.
func appendRELPFrame(dst []byte, txnr int, cmd, data string) []byte {
	dst = strconv.AppendInt(dst, int64(txnr), 10)
	dst = append(dst, ' ')
	dst = append(dst, cmd...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(len(data)), 10)
	if data != "" {
		dst = append(dst, ' ')
		dst = append(dst, data...)
	}
	return append(dst, '\n')
}

// Close ends the session with "close" and waits a moment for its rsp.
func (s *relpSink) Close() error {
	if s.conn == nil {
		return nil
	}
	conn := s.conn
	if s.txnr > 0 && s.r.Buffered() == 0 {
		conn.SetDeadline(time.Now().Add(2 * time.Second))
		txnr := nextTxnr(s.txnr)
		if _, err := conn.Write(appendRELPFrame(nil, txnr, "close", "")); err == nil {
			for range 3 {
				f, err := s.readFrame()
				if err != nil || f.cmd == relpServerClose || f.cmd == relpRsp && f.txnr == txnr {
					break
				}
			}
		}
	}
	s.conn, s.r = nil, nil
	if err := conn.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

var _ io.Closer = (*relpSink)(nil)
