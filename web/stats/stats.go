// Package stats serves the data of the auditor's log page and of the
// dashboard's charts (docs/ui.md): the keys the log is checked against,
// its latest checkpoint and growth, per-day counts of entries, sessions
// and decisions, the ingest quarantine, the last re-verification and the
// read replica's lag.
package stats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/verify"
	"github.com/acsledger/acsledger/web/access"
	"github.com/acsledger/acsledger/web/httpapi"
)

// Charts is what the charts read from the store. Both stores implement
// it. DailyStats counts per UTC day since a time, leaving one agent out;
// TreeSizes returns the newest n checkpoints' sizes, oldest first;
// QuarantineCount counts the ingest quarantine, ok false when the database
// has none.
type Charts interface {
	DailyStats(ctx context.Context, since time.Time, exclude string) ([]ledger.DayStats, error)
	TreeSizes(ctx context.Context, n int) ([]ledger.TreeSize, error)
	QuarantineCount(ctx context.Context) (n int64, ok bool, err error)
}

// chartPoints bounds the checkpoints a tree-size chart shows.
const chartPoints = 500

// chartDays is how far back the dashboard's daily charts go.
const chartDays = 30

// errNoCharts answers the chart routes of a server given no Charts, in
// the words the search routes use without their search.
var errNoCharts = httpapi.NewError(http.StatusNotImplemented, "this server was given no search or charts over its store")

// Sources are what the chart routes read beside the store's Charts.
type Sources struct {
	// Log is the Merkle log; nil for none.
	Log evidence.Log
	// Trust holds the log and witness keys the server verifies against.
	Trust *verify.Trust
	// Reverifier reports the last whole-ledger re-verification.
	Reverifier *evidence.Reverifier
	// ReplicaLag reports the read replica's latest measured lag; nil when
	// reads go to the primary.
	ReplicaLag func() ReplicaLag
	// Now is the clock.
	Now func() time.Time
}

// Routes serves the chart routes.
type Routes struct {
	charts Charts
	src    Sources
	log    *slog.Logger
}

// New returns the chart routes over charts; nil charts leaves the log
// page's chart empty and answers /stats 501.
func New(charts Charts, src Sources, log *slog.Logger) *Routes {
	return &Routes{charts: charts, src: src, log: log}
}

// Mount adds the chart routes to r, the /api/v1 router.
func (a *Routes) Mount(r chi.Router) {
	r.Get("/log", a.logInfo)
	r.Get("/stats", a.stats)
}

func (a *Routes) fail(w http.ResponseWriter, r *http.Request, err error) {
	httpapi.Fail(a.log, w, r, err)
}

type treeSizeJSON struct {
	Size uint64    `json:"size"`
	At   time.Time `json:"at"`
}

// logJSON is what an auditor needs to check the log without trusting
// this server's verdicts: the keys it verifies against, the latest
// checkpoint exactly as served, and the tree's growth.
type logJSON struct {
	// LogKeys and Witnesses are signed-note verifier keys
	// (docs/evidence-bundle.md, "keys"): what this server trusts. An
	// auditor compares them with the keys they were given out of band.
	LogKeys       []string       `json:"log_keys"`
	Witnesses     []string       `json:"witnesses"`
	WitnessQuorum int            `json:"witness_quorum"`
	Checkpoint    string         `json:"checkpoint"`
	TreeSizes     []treeSizeJSON `json:"tree_sizes"`
}

func (a *Routes) logInfo(w http.ResponseWriter, r *http.Request) {
	out := logJSON{LogKeys: []string{}, Witnesses: []string{}, TreeSizes: []treeSizeJSON{}}
	tr := a.src.Trust.Checkpoint
	out.LogKeys = append(out.LogKeys, tr.LogKeys...)
	out.Witnesses = append(out.Witnesses, tr.Witnesses...)
	out.WitnessQuorum = tr.WitnessQuorum
	if a.src.Log != nil {
		if len(out.LogKeys) == 0 {
			out.LogKeys = append(out.LogKeys, a.src.Log.VerifierKeys()...)
		}
		cp, err := a.src.Log.Checkpoint(r.Context())
		if err != nil && !errors.Is(err, ledger.ErrNotFound) {
			a.fail(w, r, fmt.Errorf("couldn't read the latest checkpoint: %w", err))
			return
		}
		out.Checkpoint = string(cp)
	}
	if a.charts != nil {
		sizes, err := a.charts.TreeSizes(r.Context(), chartPoints)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		for _, s := range sizes {
			out.TreeSizes = append(out.TreeSizes, treeSizeJSON{s.Size, s.At})
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

type dayJSON struct {
	Day       string           `json:"day"`
	Entries   int64            `json:"entries"`
	Sessions  int64            `json:"sessions"`
	Decisions map[string]int64 `json:"decisions"`
}

// statsJSON is the dashboard's integrity at a glance.
type statsJSON struct {
	Days []dayJSON `json:"days"`
	// Quarantined is null when the database has no ingest quarantine.
	Quarantined  *int64              `json:"quarantined"`
	LastReverify *evidence.RunStatus `json:"last_reverify"`
	// Checkpoint is the latest checkpoint's size and when it was signed
	// (null without a log or a checkpoint).
	Checkpoint *treeSizeJSON `json:"checkpoint"`
	// ReadReplica is the read replica's lag (null without one).
	ReadReplica *ReplicaLag `json:"read_replica"`
	// Publication is how far the published checkpoint lags the
	// integrated tree (null without a log).
	Publication *publicationJSON `json:"publication"`
	Now         time.Time        `json:"now"`
}

// publicationJSON: with a witness policy (serve --witness-policy) the
// published checkpoint may trail the signed one until enough witnesses
// cosign it; LagLeaves is integrated - published.
type publicationJSON struct {
	Policy     bool   `json:"witness_policy"`
	Published  uint64 `json:"published"`
	Signed     uint64 `json:"signed"`
	Integrated uint64 `json:"integrated"`
	LagLeaves  uint64 `json:"lag_leaves"`
}

// publisher is the part of the log that reports publication
// (tlog.Log.Publication).
type publisher interface {
	Publication(ctx context.Context) (tlog.Publication, error)
}

// ReplicaLag is how far the read replica that serves the compliance reads
// (acsledger serve --db-read) was behind the primary when last measured.
type ReplicaLag struct {
	// Bytes of WAL the replica had not replayed, and how old its newest
	// commit was while it was behind (0 when caught up).
	Bytes   uint64  `json:"lag_bytes"`
	Seconds float64 `json:"lag_seconds"`
	// Replayed and Primary are the WAL positions compared.
	Replayed string `json:"replayed_lsn,omitempty"`
	Primary  string `json:"primary_lsn,omitempty"`
	// MeasuredAt is when; Problem, when set, says why the lag is unknown
	// ("unreachable": reads go to the primary; "not_standby": the
	// replica was promoted and reads stay on it).
	MeasuredAt time.Time `json:"measured_at,omitzero"`
	Problem    string    `json:"problem,omitempty"`
	// StaleSeconds is how long the replica has been missing WAL the
	// primary had written (serve's clock against the primary's WAL
	// positions, 0 once it has replayed them), the figure compared with
	// MaxLagSeconds (--db-read-max-lag; 0 sets no limit).
	StaleSeconds  float64 `json:"stale_seconds"`
	MaxLagSeconds float64 `json:"max_lag_seconds"`
	// ReadsFrom is the store the compliance reads go to, "replica" or
	// "primary", and ReadsReason why: "within_max_lag" or "promoted" for
	// the replica, "over_max_lag" or "unreachable" for the primary.
	ReadsFrom   string `json:"reads_from"`
	ReadsReason string `json:"reads_reason"`
}

func (a *Routes) stats(w http.ResponseWriter, r *http.Request) {
	if a.charts == nil {
		a.fail(w, r, errNoCharts)
		return
	}
	now := a.src.Now().UTC()
	since := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, -(chartDays - 1))
	days, err := a.charts.DailyStats(r.Context(), since, access.LogAgentID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := statsJSON{Days: []dayJSON{}, Now: now}
	for _, d := range days {
		out.Days = append(out.Days, dayJSON{d.Day.Format(time.DateOnly), d.Entries, d.Sessions, d.Decisions})
	}
	if n, ok, err := a.charts.QuarantineCount(r.Context()); err != nil {
		a.fail(w, r, err)
		return
	} else if ok {
		out.Quarantined = &n
	}
	_, out.LastReverify = a.src.Reverifier.Status()
	sizes, err := a.charts.TreeSizes(r.Context(), 1)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if len(sizes) == 1 {
		out.Checkpoint = &treeSizeJSON{sizes[0].Size, sizes[0].At}
	}
	if a.src.ReplicaLag != nil {
		lag := a.src.ReplicaLag()
		out.ReadReplica = &lag
	}
	if p, ok := a.src.Log.(publisher); ok {
		pub, err := p.Publication(r.Context())
		if err != nil {
			a.fail(w, r, fmt.Errorf("couldn't read the log's publication: %w", err))
			return
		}
		out.Publication = &publicationJSON{Policy: pub.Policy, Published: pub.Published, Signed: pub.Signed, Integrated: pub.Integrated}
		if pub.Integrated > pub.Published {
			out.Publication.LagLeaves = pub.Integrated - pub.Published
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}
