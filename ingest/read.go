package ingest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
)

// MaxRecordBytes caps one source record. A longer line is quarantined
// with its first MaxRecordBytes bytes; the lines after it are read as usual.
const MaxRecordBytes = 1 << 20

// Lines yields the non-blank lines of a JSONL stream, numbered from 1, each
// without its line ending. Memory is bounded by MaxRecordBytes whatever
// the input's size. A read error ends the sequence with a Raw whose Err is
// set and whose Record is 0.
func Lines(r io.Reader, file string) iter.Seq[Raw] {
	return func(yield func(Raw) bool) {
		br := bufio.NewReaderSize(r, 64<<10)
		var n int64
		for {
			line, tooLong, err := readLine(br)
			if len(line) > 0 || tooLong || err == nil {
				n++
			}
			if tooLong {
				if !yield(Raw{File: file, Record: n, Bytes: line, Err: fmt.Errorf("line is longer than %d bytes", MaxRecordBytes)}) {
					return
				}
			} else if len(bytes.TrimSpace(line)) > 0 {
				if !yield(Raw{File: file, Record: n, Bytes: line}) {
					return
				}
			}
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(Raw{File: file, Err: fmt.Errorf("%w: couldn't read %s after line %d: %v", ErrUnreadable, file, n, err)})
				return
			}
		}
	}
}

// readLine reads one line without its "\n" or "\r\n". A line over
// MaxRecordBytes is returned cut, with tooLong, and the rest of it skipped.
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > MaxRecordBytes {
			tooLong = true
			line = append(line, frag[:max(0, MaxRecordBytes-len(line))]...)
		} else {
			line = append(line, frag...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		return line, tooLong, err
	}
}

// gzipMagic starts every gzip stream (RFC 1952).
var gzipMagic = []byte{0x1f, 0x8b}

// ErrUnreadable marks input that cannot be read at all (not gzip when it
// says so, not a JSON array): exit status 2 for the command.
var ErrUnreadable = errors.New("unreadable input")

// ArrayElements yields the elements of a JSON array, gzip-compressed or
// plain (told by the gzip magic), as OPA's decision-log plugin uploads
// them: each element's exact bytes, numbered from 1. Memory is bounded by
// the largest element. An element that breaks the array's syntax ends the
// sequence with a Raw whose Err is set, holding up to MaxRecordBytes of
// what follows: after a syntax error no later element boundary can be
// trusted. Input that is not an array at all yields one Raw whose Err
// wraps ErrUnreadable.
func ArrayElements(r io.Reader, file string) iter.Seq[Raw] {
	return func(yield func(Raw) bool) {
		br := bufio.NewReaderSize(r, 64<<10)
		var in io.Reader = br
		if head, _ := br.Peek(2); bytes.Equal(head, gzipMagic) {
			zr, err := gzip.NewReader(br)
			if err != nil {
				yield(Raw{File: file, Err: fmt.Errorf("%w: %s: bad gzip header: %v", ErrUnreadable, file, err)})
				return
			}
			defer zr.Close()
			in = zr
		}
		// An element may not hold more than MaxRecordBytes in the decoder's
		// buffer: without the cap one huge element would be read whole.
		capped := &elementCap{r: in}
		dec := json.NewDecoder(capped)
		capped.dec = dec
		tok, err := dec.Token()
		if err != nil || tok != json.Delim('[') {
			if err == nil {
				err = fmt.Errorf("got %v", tok)
			}
			yield(Raw{File: file, Err: fmt.Errorf("%w: %s: not a JSON array: %v", ErrUnreadable, file, err)})
			return
		}
		var n int64
		for dec.More() {
			n++
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				if errors.Is(err, errElementTooLarge) {
					yield(Raw{File: file, Record: n, Err: fmt.Errorf("element %d is larger than %d bytes; the array is not read further", n, MaxRecordBytes)})
					return
				}
				rest, _ := io.ReadAll(io.LimitReader(io.MultiReader(dec.Buffered(), in), MaxRecordBytes))
				yield(Raw{File: file, Record: n, Bytes: rest, Err: fmt.Errorf("element %d breaks the array: %v", n, err)})
				return
			}
			if !yield(Raw{File: file, Record: n, Bytes: raw}) {
				return
			}
		}
		if _, err := dec.Token(); err != nil {
			rest, _ := io.ReadAll(io.LimitReader(io.MultiReader(dec.Buffered(), in), MaxRecordBytes))
			yield(Raw{File: file, Record: n + 1, Bytes: rest, Err: fmt.Errorf("the array does not end after element %d: %v", n, err)})
			return
		}
		if rest, _ := io.ReadAll(io.LimitReader(io.MultiReader(dec.Buffered(), in), MaxRecordBytes)); len(bytes.TrimSpace(rest)) > 0 {
			yield(Raw{File: file, Record: n + 1, Bytes: rest, Err: errors.New("data after the array")})
		}
	}
}

var errElementTooLarge = errors.New("array element too large")

// elementCap fails a read once the decoder holds more than MaxRecordBytes
// (and a read buffer) past the end of the last value it decoded.
type elementCap struct {
	r    io.Reader
	dec  *json.Decoder
	read int64
}

func (c *elementCap) Read(p []byte) (int, error) {
	if c.dec != nil && c.read-c.dec.InputOffset() > MaxRecordBytes+64<<10 {
		return 0, errElementTooLarge
	}
	n, err := c.r.Read(p)
	c.read += int64(n)
	return n, err
}
