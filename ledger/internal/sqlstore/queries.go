package sqlstore

import (
	_ "embed"
	"reflect"

	"github.com/acsledger/acsledger/ledger/internal/sqlq"
)

// The store's own queries, written once with PostgreSQL's placeholders
// ($n, $n::type); Dialect.Rewrite words them for the driver's database.
var (
	//go:embed queries.sql
	queriesSQL string
	//go:embed search.sql
	searchSQL string
	//go:embed stats.sql
	statsSQL string
	//go:embed logstorage.sql
	logSQL string
	//go:embed sources.sql
	sourcesSQL string
	//go:embed retention.sql
	retentionSQL string
)

// Queries are the named queries of the store, one field each (sqlq.Load):
// those of this package's .sql files, and those whose text differs
// between databases beyond placeholders, from the driver's dialect file
// (each driver's dialect.sql). A name missing from both, or defined in
// both, stops the driver's package at initialisation.
type Queries struct {
	// queries.sql
	Session, Sessions, Entries, EntriesByStep, EntryByStep,
	Response, RequestParams, RecordRequest,
	InsertBundle, BundleDigest, PolicyBundle, PolicyBundles,
	InsertErasure, DeleteRequestParams, Erasure,
	InsertToken, TokenByHash, Tokens, RevokeToken, TokenExists,
	Quarantined,
	ExportCursor, ExportCursors, PutExportCursor string
	// sources.sql
	SourceRecord, InsertSourceErasure, DeleteSourceRecord, SourceErasure,
	EntryExists, Payloads string
	// search.sql
	SearchEntries, SearchSessions, RecordedSteps string
	// stats.sql
	TreeSizes, CountQuarantined string
	// logstorage.sql
	LogSize, LogLeaves, LogFullTile, LogTileRoots, LogLeafIndexByPosition,
	LogLeafIndexByEntryHash, LogCheckpoint, LogFirstCheckpointAfter, LogCosignatures string
	LogAddTimestamp, LogTimestamp, LogLastStamped, LogUnstamped, LogCosignedSizes string
	// retention.sql
	PutRule, DeleteRule, Rules, InsertHold, InsertHoldSession, ReleaseHold,
	Holds, HoldByID, HoldSessions, HeldBy, ParamsKeys,
	DeleteErasedParams, SourceKeys, DeleteErasedSource, StartRun, FinishRun, UnfinishedRuns, RunErasures,
	RetentionTotals, OldestPayload string

	// The dialect's file.
	DailyDecisions, DailySessions, HasQuarantine     string
	IngestedByKey, Flagged                           string
	EraseParamsBatch, EraseSourceBatch, OldestSource string
	LogPending, LogSessionLeaves, LogLastSessionLeaf,
	LogLatestCheckpoint, LogInsertCheckpoint, LogMoveHead, LogInsertHead,
	LogAddCosignature string
	ExportEntries string
}

// LoadQueries returns the store's queries for a driver: this package's
// and dialectSQL's, each worded by dl.
func LoadQueries(dl Dialect, dialectSQL string) *Queries {
	q := sqlq.Load[Queries](queriesSQL + "\n" + sourcesSQL + "\n" + searchSQL + "\n" + statsSQL + "\n" + logSQL + "\n" + retentionSQL + "\n" + dialectSQL)
	v := reflect.ValueOf(&q).Elem()
	for i := range v.NumField() {
		v.Field(i).SetString(dl.Rewrite(v.Field(i).String()))
	}
	return &q
}
