package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/acsledger/acsledger/internal/term"
)

// progressMin is the smallest input that gets a progress line: below it a
// check finishes before a person would read one.
const progressMin = 4 << 20

// progressReader returns in wrapped to draw a progress line on stderr, when
// stderr is a terminal and in is a regular file of at least progressMin
// bytes; otherwise it returns in unchanged, so that scripts see nothing
// extra.
func progressReader(in io.Reader, name string, stderr io.Writer) io.Reader {
	f, ok := in.(*os.File)
	if !ok {
		return in
	}
	tty, ok := stderr.(*os.File)
	if !ok || !term.Is(tty) {
		return in
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() < progressMin {
		return in
	}
	return newProgress(in, tty, name, fi.Size(), time.Now)
}

// progress counts the bytes read through it and redraws one line at most
// every progressEvery; at EOF it erases the line.
type progress struct {
	r     io.Reader
	w     io.Writer
	name  string
	total int64
	done  int64
	now   func() time.Time
	start time.Time
	last  time.Time
	drawn bool
}

const progressEvery = 200 * time.Millisecond

func newProgress(r io.Reader, w io.Writer, name string, total int64, now func() time.Time) *progress {
	t := now()
	return &progress{r: r, w: w, name: name, total: total, now: now, start: t, last: t}
}

func (p *progress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.done += int64(n)
	if err != nil {
		if p.drawn {
			fmt.Fprint(p.w, "\r\x1b[K")
			p.drawn = false
		}
		return n, err
	}
	if t := p.now(); t.Sub(p.last) >= progressEvery {
		p.last = t
		p.draw(t)
	}
	return n, err
}

func (p *progress) draw(t time.Time) {
	pct := 0.0
	if p.total > 0 {
		pct = 100 * float64(p.done) / float64(p.total)
	}
	rate := 0.0
	if s := t.Sub(p.start).Seconds(); s > 0 {
		rate = float64(p.done) / s / (1 << 20)
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s: %.1f of %.1f MiB (%.0f%%), %.0f MiB/s", p.name,
		float64(p.done)/(1<<20), float64(p.total)/(1<<20), pct, rate)
	p.drawn = true
}
