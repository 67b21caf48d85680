package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/acsledger/acsledger/internal/exportsink"
	"github.com/acsledger/acsledger/ledger/export"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// exportFlags are serve's push sinks (docs/export.md).
type exportFlags struct {
	sinks, formats listFlag
	configs        []exportsink.Config
}

func (f *exportFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.sinks, "export", "push every ledger event to the sink NAME=URL (repeatable): syslog+tcp://HOST:PORT, syslog+tls://HOST:PORT?ca=FILE, http(s)://..., otlp+http://HOST:PORT, file:///DIR, parquet:///DIR, parquet+s3://HOST/BUCKET/PREFIX (docs/export.md)")
	fs.Var(&f.formats, "export-format", "the encoding of sink NAME: NAME=ocsf|ocsf@1.5|cloudevents|acs (default ocsf, OCSF 1.9 with record_integrity; ocsf@1.5 the OCSF 1.5 events as before; repeatable)")
}

// check parses and checks every sink before serve starts anything.
func (f *exportFlags) check() error {
	cs, err := exportsink.Configure(f.sinks, f.formats)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	f.configs = cs
	return nil
}

// start opens the sinks and runs one delivery loop each in g, over st.
// The loops only read the ledger and write their cursors: a sink that is
// down or slow never holds up a decision or an append.
func (f *exportFlags) start(ctx context.Context, g *errgroup.Group, st export.Store, origin string, log *slog.Logger) ([]*export.Deliverer, error) {
	var ds []*export.Deliverer
	for _, c := range f.configs {
		sink, err := exportsink.Open(c)
		if err != nil {
			for _, d := range ds {
				d.Sink.Close()
			}
			return nil, err
		}
		d := &export.Deliverer{Name: c.Name, Store: st, Sink: sink, Logger: log,
			Encoder: export.Encoder{Format: c.Format, Options: c.Options, Origin: origin}}
		// A sink that writes files (Parquet) asks for bigger batches and
		// a slower poll, so a lake gets few big files.
		if b, ok := sink.(interface{ BatchSize() int }); ok {
			d.Batch = b.BatchSize()
		}
		if p, ok := sink.(interface{ PollInterval() time.Duration }); ok {
			d.Poll = p.PollInterval()
		}
		ds = append(ds, d)
		log.Info("exporting events", "sink", c.Name, "to", c.Redacted, "format", c.Format)
	}
	for _, d := range ds {
		g.Go(func() error {
			d.Run(ctx)
			return nil
		})
	}
	if err := export.RegisterMetrics(ds); err != nil {
		return nil, fmt.Errorf("couldn't register the export metrics: %w", err)
	}
	return ds, nil
}

// statuses reports the sinks' state for GET /api/v1/exports.
func statuses(ds []*export.Deliverer) func() []export.Status {
	return func() []export.Status {
		out := make([]export.Status, len(ds))
		for i, d := range ds {
			out[i] = d.Status()
		}
		return out
	}
}
