package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"
	"golang.org/x/sync/errgroup"

	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/internal/keydir"
	"github.com/acsledger/acsledger/internal/telemetry"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/ledger/readroute"
	"github.com/acsledger/acsledger/ledger/storeopen"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/tlogserve"
	"github.com/acsledger/acsledger/web/ui"
	"github.com/acsledger/acsledger/web/whatifapi"
)

// shutdownGrace bounds how long serve waits for in-flight requests after a
// signal. Appends acknowledged before the signal are already durable; the
// grace only lets running ones finish and answer.
const shutdownGrace = 15 * time.Second

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	var db dbFlags
	db.register(fs, "store URL: PostgreSQL, or a directory path for the embedded store (default ./acsledger-data)")
	var readDB readDBFlags
	readDB.register(fs)
	maxEntry := fs.Int("max-entry-bytes", ledger.DefaultMaxEntryBytes, "largest accepted ContextEntry, in bytes")
	var gf guardianFlags
	gf.register(fs)
	var lf logFlags
	lf.register(fs)
	var af accessFlags
	af.register(fs)
	var inf ingestServeFlags
	inf.register(fs)
	var xf exportFlags
	xf.register(fs)
	var pf publishFlags
	pf.register(fs)
	var rf retentionFlags
	rf.register(fs)
	reverifyEvery := fs.Duration("reverify-every", time.Hour, "re-verify the whole ledger this often (0: only on demand through the admin API, whose token is $ACSLEDGER_ADMIN_TOKEN)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	log := newLogger(stderr)
	if err := xf.check(); err != nil {
		return err
	}
	if err := pf.check(); err != nil {
		return err
	}
	if (af.tlsCert == "") != (af.tlsKey == "") {
		return fmt.Errorf("%w: --tls-cert and --tls-key go together", errUsage)
	}
	tokenFile := af.adminTokenPath(storeURL(db.named()))
	// Secrets readable by others are refused before anything starts.
	if err := keydir.CheckPrivate(tokenFile); err != nil {
		return err
	}
	if af.tlsKey != "" {
		if err := keydir.CheckPrivate(af.tlsKey); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	url, err := db.url()
	if err != nil {
		return err
	}
	readURL, err := readDB.url()
	if err != nil {
		return err
	}
	maxLag, err := readDB.limit(readURL, os.Getenv)
	if err != nil {
		return err
	}
	// serve never migrates: it runs as the writer login, which may not
	// change the schema (`acsledger migrate`, as the owner, does). The
	// embedded store, which has no roles, migrates as it opens.
	store, opts, err := gf.openStore(ctx, url, ledger.Options{MaxEntryBytes: *maxEntry}, log)
	if err != nil {
		return err
	}
	defer store.Close()
	var replica *storeopen.ReadReplica
	if readURL != "" {
		if replica, err = storeopen.OpenReadReplica(ctx, readURL, store, opts); err != nil {
			return fmt.Errorf("couldn't open the read replica %s: %w", redact(readURL), err)
		}
		defer replica.Close()
	}
	var tokens web.Tokens = store
	bootstrap := os.Getenv("ACSLEDGER_ADMIN_TOKEN")
	if bootstrap == "" {
		if err := firstAdminToken(ctx, tokens, tokenFile, stdout, stderr, log); err != nil {
			return err
		}
	}

	tel, stopTelemetry, err := startTelemetry(ctx, log)
	if err != nil {
		return err
	}
	defer stopTelemetry()

	keys, keySet, err := gf.loadKeys(url, log)
	if err != nil {
		return err
	}
	keysDir := gf.keysDir
	if keysDir == "" {
		keysDir = defaultKeysDir(url)
	}
	if err := keydir.CheckDir(keysDir); err != nil {
		return err
	}
	mlog, err := lf.openLog(ctx, store, keysDir, log)
	if err != nil {
		return err
	}
	store = storeopen.NotifyOnAppend(store, mlog.Notify)
	// The agent's copy of its receipts reads the primary: the entry an
	// agent just wrote may not be on a replica yet.
	receipts := &evidence.StepReceipts{Store: store, Log: mlog, Retry: mlog.BatchDelay(), Pending: guardian.ErrReceiptPending}
	gd, err := gf.newGuardian(ctx, store, keys, keySet, receipts, log)
	if err != nil {
		return err
	}
	// The web layer reads through reads: the primary, or with --db-read
	// the read replica for the compliance reads.
	var (
		reads   storeopen.Store = store
		evLog   evidence.Log    = mlog
		lagOf   func() web.ReplicaLag
		monitor *readroute.Monitor
	)
	if replica != nil {
		monitor = readroute.NewMonitor(ctx, replica, maxLag, log)
		rr := readroute.NewReads(store, replica, monitor)
		reads, evLog, lagOf = routedStore{rr, primaryStore{store}}, readroute.CaughtUpLog(mlog, rr), func() web.ReplicaLag { return web.ReplicaLag(monitor.Lag()) }
		log.Info("compliance reads go to the read replica", "db_read", redact(readURL), "max_lag", maxLag, "reads_from", monitor.Lag().ReadsFrom, "lag_bytes", monitor.Lag().Bytes, "problem", monitor.Lag().Problem)
	}
	retentionOpts, sweeper, closeEraser, err := rf.open(ctx, url, store, mlog, log)
	if err != nil {
		return err
	}
	defer closeEraser()
	ev := lf.evidenceOptions(reads, evLog, keySet, log)
	ingestOpts := inf.options()
	ingestOpts.Store = reads
	// Export reads the primary: its cursors are written there, and a
	// leaf index means the same on every copy of the log.
	g, gctx := errgroup.WithContext(ctx)
	// The publisher starts first: a bucket it refuses stops serve before
	// anything else runs.
	if err := pf.start(gctx, g, mlog, log); err != nil {
		return err
	}
	sinks, err := xf.start(gctx, g, store, mlog.Origin(), log)
	if err != nil {
		return err
	}
	handler := web.New(reads, web.Options{Logger: log, MaxEntryBytes: int64(*maxEntry), Evidence: ev, Search: reads, Charts: reads, Auth: web.AuthOptions{
		Tokens: tokens, Bootstrap: bootstrap, SessionTTL: af.sessionTTL,
		RateLimits: af.rateLimits(), ACSRequireToken: af.acsToken,
	}, Ingest: ingestOpts, Ready: readiness(store, mlog), ReplicaLag: lagOf, Writes: store,
		Export:    web.ExportOptions{Store: reads, Origin: mlog.Origin(), Sinks: statuses(sinks)},
		Retention: retentionOpts,
		WhatIf:    whatifapi.Options{Store: store}})
	mountRoutes(handler.Router(), mlog, tel.Metrics, gd, gd.ApprovalHandler(), log)
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      120 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          nil,
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("couldn't listen on %s: %w", *addr, err)
	}
	scheme := "http"
	if af.tlsCert != "" {
		scheme = "https"
		cert, err := tls.LoadX509KeyPair(af.tlsCert, af.tlsKey)
		if err != nil {
			ln.Close()
			return fmt.Errorf("couldn't load the TLS certificate: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	adminHint := "$ACSLEDGER_ADMIN_TOKEN"
	if bootstrap == "" {
		adminHint, _ = filepath.Abs(tokenFile)
	}
	log.Info("acsledger serving", "url", scheme+"://"+ln.Addr().String(), "store", redact(url), "admin_token", adminHint)

	g.Go(func() error {
		// The log integrates appended entries and signs checkpoints until
		// shutdown; entries appended but not yet integrated stay queued in
		// the store and are integrated after a restart.
		if err := mlog.Run(gctx); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("merkle log: %w", err)
		}
		return nil
	})
	if st := lf.stamper; st != nil {
		log.Info("checkpoints are time-stamped", "tsa", lf.tsaURL)
		g.Go(func() error {
			st.Run(gctx)
			return nil
		})
		st.Notify() // checkpoints signed before this start
	}
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	if monitor != nil {
		g.Go(func() error {
			monitor.Run(gctx, readroute.LagEvery)
			return nil
		})
	}
	if sweeper != nil {
		g.Go(func() error {
			sweeper.Every(gctx, rf.every)
			return nil
		})
	}
	if *reverifyEvery > 0 && ev.Reverifier != nil {
		g.Go(func() error {
			ev.Reverifier.Schedule(gctx, *reverifyEvery)
			return nil
		})
	}
	g.Go(func() error {
		<-gctx.Done()
		log.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	if err := g.Wait(); err != nil {
		return err
	}
	if err := store.Close(); err != nil {
		return fmt.Errorf("couldn't close store: %w", err)
	}
	log.Info("stopped")
	return nil
}

// mountRoutes adds the routes other packages serve beside web's API: the
// Merkle log, the UI, the metrics and the Guardian. web.AccessTable must
// list each (TestAccessTable walks the router this builds).
func mountRoutes(r chi.Router, mlog *tlog.Log, metrics, acs, approvals http.Handler, log *slog.Logger) {
	tlogserve.Mount(r, mlog, log)
	ui.Mount(r)
	r.Method(http.MethodGet, "/metrics", metrics)
	r.Method(http.MethodPost, "/acs", acs)
	r.Method(http.MethodPost, "/acs/approvals", approvals)
}

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("migrate", stderr)
	var db dbFlags
	db.register(fs, "store URL (PostgreSQL as the owner role, or the embedded store's directory)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	url, err := db.url()
	if err != nil {
		return err
	}
	if err := storeopen.Migrate(ctx, url); err != nil {
		return fmt.Errorf("couldn't migrate %s: %w", redact(url), err)
	}
	fmt.Fprintf(stdout, "migrated %s\n", redact(url))
	return nil
}

// storeURL applies the default: the embedded store under ./acsledger-data.
func storeURL(db string) string {
	if db == "" {
		return "./acsledger-data"
	}
	return db
}

// routedStore is the primary store with its compliance reads made through
// readroute.Reads, whose methods, one embedding level above the store's,
// stand in for them.
type routedStore struct {
	readroute.Reads
	primaryStore
}

type primaryStore struct{ storeopen.Store }

// ParallelWriters passes on the primary's: ingest writes go there.
func (p primaryStore) ParallelWriters() int { return storeopen.ParallelWriters(p.Store) }

// startTelemetry sets up OpenTelemetry as the OTEL_* environment says
// (package internal/telemetry); a setting it refuses is a usage error.
// stop flushes the exporters, logging what it could not.
func startTelemetry(ctx context.Context, log *slog.Logger) (tel *telemetry.Telemetry, stop func(), err error) {
	env, err := telemetry.ReadEnv(os.Getenv)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if tel, err = telemetry.New(ctx, env, log); err != nil {
		return nil, nil, err
	}
	return tel, func() {
		if err := tel.Stop(ctx); err != nil {
			log.Warn("telemetry shutdown incomplete", "err", err)
		}
	}, nil
}
