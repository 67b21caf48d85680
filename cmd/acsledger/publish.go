package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"golang.org/x/sync/errgroup"

	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/ledger/tlogpub"
)

// publishFlags publish the public log to object storage as static
// C2SP tiles (docs/object-storage.md).
type publishFlags struct {
	url    string
	bucket tlogpub.Bucket
}

func (f *publishFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "publish", "", "publish the public log as static C2SP tlog-tiles to `URL`: s3://BUCKET/PREFIX?endpoint=http(s)://HOST:PORT&region=R (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or &credentials=FILE) or file:///DIR (docs/object-storage.md)")
}

// check parses --publish before serve starts anything; nothing is
// contacted yet.
func (f *publishFlags) check() error {
	if f.url == "" {
		return nil
	}
	b, err := tlogpub.Open(f.url)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	f.bucket = b
	return nil
}

// start reads the bucket (refusing one that is unreachable or holds
// another log) and runs the publisher in g. It reads only what the log
// has published and never holds up an append.
func (f *publishFlags) start(ctx context.Context, g *errgroup.Group, mlog *tlog.Log, log *slog.Logger) error {
	if f.bucket == nil {
		return nil
	}
	p := tlogpub.New(mlog, f.bucket, tlogpub.Config{Logger: log})
	if err := p.Start(ctx); err != nil {
		return fmt.Errorf("--publish: %w", err)
	}
	log.Info("publishing the log to object storage", "to", f.bucket.String(), "published_size", p.Status().Published)
	g.Go(func() error {
		p.Run(ctx)
		return nil
	})
	return nil
}
