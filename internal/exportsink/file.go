package exportsink

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/acsledger/acsledger/ledger/export"
)

// fileSink appends NDJSON to DIR/NAME.ndjson, fsyncs each batch, and
// rotates the file by renaming it to DIR/NAME-<UTC time>.ndjson once it
// holds maxBytes or more, which is what Fluent Bit's and Vector's file
// tailers follow. A rotated file is never written again.
type fileSink struct {
	c    Config
	f    *os.File
	size int64
	buf  []byte
}

func newFile(c Config) (*fileSink, error) {
	s := &fileSink{c: c}
	if err := s.open(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *fileSink) path() string { return filepath.Join(s.c.dir, s.c.Name+".ndjson") }

func (s *fileSink) open() error {
	f, err := os.OpenFile(s.path(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("export sink %s: couldn't open %s: %w", s.c.Name, s.path(), err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("export sink %s: %w", s.c.Name, err)
	}
	s.f, s.size = f, st.Size()
	return nil
}

func (s *fileSink) Send(ctx context.Context, batch []export.Event) error {
	if s.f == nil {
		if err := s.open(); err != nil {
			return err
		}
	}
	if s.size >= s.c.maxBytes {
		if err := s.rotate(); err != nil {
			return err
		}
	}
	s.buf = s.buf[:0]
	for _, e := range batch {
		s.buf = append(s.buf, e.JSON...)
		s.buf = append(s.buf, '\n')
	}
	n, err := s.f.Write(s.buf)
	s.size += int64(n)
	if err == nil {
		err = s.f.Sync()
	}
	if err != nil {
		// A torn batch is written again whole; the receiver deduplicates
		// by entry hash. Reopen to start a fresh line.
		s.f.Close()
		s.f = nil
		return fmt.Errorf("export sink %s: couldn't write %s: %w", s.c.Name, s.path(), err)
	}
	return nil
}

func (s *fileSink) rotate() error {
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("export sink %s: %w", s.c.Name, err)
	}
	s.f = nil
	stamp := time.Now().UTC().Format("20060102T150405.000000000Z")
	to := filepath.Join(s.c.dir, s.c.Name+"-"+stamp+".ndjson")
	if err := os.Rename(s.path(), to); err != nil {
		return fmt.Errorf("export sink %s: couldn't rotate %s: %w", s.c.Name, s.path(), err)
	}
	return s.open()
}

func (s *fileSink) Close() error {
	if s.f == nil {
		return nil
	}
	return s.f.Close()
}
