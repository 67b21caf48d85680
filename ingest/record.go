package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/ledger"
)

// Format names a source format, as `acsledger ingest --format` takes it.
type Format string

// The formats.
const (
	OPA            Format = "opa"
	BashGuard      Format = "bash-guard"
	BashGuardAudit Format = "bash-guard-audit"
	A2H            Format = "a2h"
	ACS            Format = "acs"
)

// Formats lists every format. OTelGenAI comes in over OTLP/HTTP only
// (web/ingestapi); `acsledger ingest` reads the others.
var Formats = []Format{OPA, BashGuard, BashGuardAudit, A2H, ACS, OTelGenAI}

// Reason codes of quarantined records (docs/findings.md). The store adds
// ledger.ReasonChainMismatch, ledger.ReasonReplayedJTI,
// ledger.ReasonKeyConflict and ledger.ReasonLedgerRefused.
const (
	ReasonMalformedJSON     = "malformed_json"
	ReasonSchemaInvalid     = "schema_invalid"
	ReasonChainMismatch     = ledger.ReasonChainMismatch
	ReasonSignatureInvalid  = "signature_invalid"
	ReasonMalformedSigHdr   = "malformed_signature_header"
	ReasonUnsupportedVer    = "unsupported_version"
	ReasonStaleTimestamp    = "stale_timestamp"
	ReasonSignatureMismatch = "signature_mismatch"
	ReasonReplayedJTI       = ledger.ReasonReplayedJTI
	ReasonDefaultedActor    = "defaulted_non_system_actor"
	ReasonResolutionType    = "resolution_not_allowed_for_type"
	// ReasonExpiryDefaultResolution: the actor is system:default_on_expire
	// but the resolution is not "expired" (spec §6).
	ReasonExpiryDefaultResolution = "expiry_default_not_expired"
)

// Flags set on bash-guard and A2H entries, queryable with
// IngestStore.Flagged.
const (
	FlagFailOpen          = "fail_open"
	FlagFailOpenKeyless   = "fail_open_keyless"
	FlagUnlockBypass      = "unlock_bypass"
	FlagUnlockFilterError = "unlock_filter_error"
	// FlagUnboundPayload marks an A2H v0.2 resolution: its signature
	// binds no response payload (spec §9.2 binds it from v0.3).
	FlagUnboundPayload = "unbound_payload"
)

// Raw is one source record as read: its exact bytes and where it is.
type Raw struct {
	File string
	// Record is the 1-based line, or the 1-based index in a JSON array.
	Record int64
	Bytes  []byte
	// Err is set when the record could not even be cut out of its file
	// (a line over the size limit, a broken JSON array): the record is
	// then quarantined as malformed_json with the bytes that were read.
	Err error
}

// Store is what ingest needs of the ledger. Lookup is for linking records
// to ones stored before (a bash-guard audit line to its decision, an A2H
// resolution to the ASK entry it answers).
type Store interface {
	Ingest(ctx context.Context, rs []ledger.IngestRecord) ([]ledger.IngestResult, error)
	IngestedByKey(ctx context.Context, source, key string) (ledger.IngestResult, error)
	EntriesByStep(ctx context.Context, stepID, sessionID string) ([]ledger.Entry, error)
	Session(ctx context.Context, sessionID string) (ledger.Session, error)
}

// malformed returns the quarantined record of a raw record that could not
// be cut out of its file, or that is not strict JSON by acs.Canonicalize's
// rules (duplicate members, invalid UTF-8, lone surrogates, numbers out of
// range, trailing data), or nil: the first check of every format.
func malformed(f Format, raw Raw) *ledger.IngestRecord {
	err := raw.Err
	if err == nil {
		if _, err = acs.Canonicalize(raw.Bytes); err == nil {
			return nil
		}
	}
	q := quarantine(f, raw, "", ReasonMalformedJSON, "%v", err)
	return &q
}

// decodeRecord quarantines a malformed record (as malformed does) or one
// that strictDecode cannot decode into v, saying "<what>: <error>"; it
// returns nil when v holds the record.
func decodeRecord(f Format, raw Raw, v any, what string) *ledger.IngestRecord {
	if q := malformed(f, raw); q != nil {
		return q
	}
	if err := strictDecode(raw.Bytes, v); err != nil {
		q := quarantine(f, raw, "", ReasonSchemaInvalid, "%s: %v", what, err)
		return &q
	}
	return nil
}

// naturalKey is the natural key of a record identified by two strings: the
// pair as a JSON array, which no two pairs share.
func naturalKey(a, b string) string {
	k, _ := json.Marshal([2]string{a, b})
	return string(k)
}

// quarantine returns the ingest record of a raw record that failed a check.
func quarantine(f Format, raw Raw, key, reason, format string, args ...any) ledger.IngestRecord {
	return ledger.IngestRecord{
		Source: string(f), Key: key, File: raw.File, Record: raw.Record, Raw: raw.Bytes,
		Digest:     sha256.Sum256(raw.Bytes),
		Quarantine: &ledger.Quarantine{Reason: reason, Detail: fmt.Sprintf("%s:%d: ", raw.File, raw.Record) + fmt.Sprintf(format, args...)},
	}
}

// sourceRef is how an ingested entry names the record it was made from:
// its format, its natural key and the SHA-256 of its exact bytes. The
// bytes themselves are stored beside the entry (ledger.IngestRecord.
// KeepSource), sealed and erasable, so the chain commits to them without
// holding them (docs/ingest.md). Entries written before this held the
// bytes inline, as "source_record"; they stay as they were.
type sourceRef struct {
	SourceFormat string `json:"source_format"`
	SourceKey    string `json:"source_key"`
	SourceSHA256 string `json:"source_sha256"`
}

func newSourceRef(f Format, key string, raw Raw) sourceRef {
	sum := sha256.Sum256(raw.Bytes)
	return sourceRef{SourceFormat: string(f), SourceKey: key, SourceSHA256: hex.EncodeToString(sum[:])}
}
