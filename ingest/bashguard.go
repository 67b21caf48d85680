package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/acsledger/acsledger/ingest/schemas"
	"github.com/acsledger/acsledger/ledger"
)

// BashGuardMapper maps bash-guard decisions (decision-output.v1 as the seed
// has it, or a published form beside it: bashGuardSchemas). A decision goes to the session of its
// metadata.session_id; without one, to "bash-guard:host:" + its
// metadata.hostname, or without that to "bash-guard:file:" + the base name
// of the file it came from.
type BashGuardMapper struct{}

// bashGuardDecision holds the members the mapping reads; the schema has
// checked the rest.
type bashGuardDecision struct {
	Decision string `json:"decision"`
	Action   string `json:"action"`
	Source   string `json:"source"`
	Reasons  []struct {
		RuleID string `json:"rule_id"`
	} `json:"reasons"`
	Input struct {
		Raw string `json:"raw"`
	} `json:"input"`
	Metadata struct {
		RulebookDigest string `json:"rulebook_digest"`
		OPAVersion     string `json:"opa_version"`
		PolicyPath     string `json:"policy_path"`
		Hostname       string `json:"hostname"`
		SessionID      string `json:"session_id"`
	} `json:"metadata"`
	EvaluatedAt string `json:"evaluated_at"`
	DecisionID  string `json:"decision_id"`
}

// bashGuardEntry is the ContextEntry of a bash-guard decision or audit
// line. The host the decision was made on (metadata.hostname) identifies
// the client and stays in the source record only, sealed and erasable
// (docs/ingest.md); entries ingested before this held it as "hostname",
// and the verifier lists them (client_in_entry).
type bashGuardEntry struct {
	EntryID       string          `json:"entry_id"`
	StepID        string          `json:"step_id"`
	StepType      string          `json:"step_type"`
	Timestamp     string          `json:"timestamp"`
	Decision      bashGuardResult `json:"decision"`
	Flags         []string        `json:"flags"`
	DecisionEntry *entryRef       `json:"decision_entry,omitempty"`
	sourceRef
	SourceSchema  string `json:"source_schema,omitempty"`
	PolicyPath    string `json:"policy_path,omitempty"`
	EngineVersion string `json:"engine_version,omitempty"`
}

type bashGuardResult struct {
	DecisionID     string          `json:"decision_id"`
	Disposition    string          `json:"disposition"`
	Action         string          `json:"action,omitempty"`
	Source         string          `json:"source"`
	Command        string          `json:"command"`
	RuleIDs        []string        `json:"rule_ids"`
	PolicyVersions []policyVersion `json:"policy_versions,omitempty"`
}

// entryRef names another ledger entry.
type entryRef struct {
	SessionID string `json:"session_id"`
	Position  int64  `json:"position"`
	EntryHash string `json:"entry_hash"`
}

// bashGuardPolicy is the policy_id of a bash-guard rulebook, whose
// rulebook_digest is the version.
const bashGuardPolicy = "bash-guard-rulebook"

// bashGuardFlags returns the flags of a decision source.
func bashGuardFlags(source string) []string {
	switch source {
	case "fail-open":
		return []string{FlagFailOpen}
	case "fail-open-keyless":
		return []string{FlagFailOpen, FlagFailOpenKeyless}
	case "opa-unlocked":
		return []string{FlagUnlockBypass}
	case "unlock-filter-error":
		return []string{FlagUnlockFilterError}
	}
	return []string{}
}

// Map implements Mapper.
func (BashGuardMapper) Map(_ context.Context, raw Raw) ledger.IngestRecord {
	if q := malformed(BashGuard, raw); q != nil {
		return *q
	}
	doc, err := schemas.Decode(raw.Bytes)
	if err != nil {
		return quarantine(BashGuard, raw, "", ReasonMalformedJSON, "%v", err)
	}
	key := ""
	if m, ok := doc.(map[string]any); ok {
		key, _ = m["decision_id"].(string)
	}
	schema, err := bashGuardSchema(doc)
	if err != nil {
		return quarantine(BashGuard, raw, key, ReasonSchemaInvalid, "%v", err)
	}
	var d bashGuardDecision
	if err := json.Unmarshal(raw.Bytes, &d); err != nil {
		return quarantine(BashGuard, raw, key, ReasonSchemaInvalid, "%v", err)
	}
	session := d.Metadata.SessionID
	switch {
	case session != "":
	case d.Metadata.Hostname != "":
		session = "bash-guard:host:" + d.Metadata.Hostname
	default:
		session = "bash-guard:file:" + filepath.Base(raw.File)
	}
	flags := bashGuardFlags(d.Source)
	rules := make([]string, 0, len(d.Reasons))
	for _, r := range d.Reasons {
		rules = append(rules, r.RuleID)
	}
	entry, err := json.Marshal(bashGuardEntry{
		EntryID: "bash-guard:" + d.DecisionID, StepID: "bash-guard:" + d.DecisionID, StepType: "ingest/bash-guard/decision",
		Timestamp: d.EvaluatedAt,
		Decision: bashGuardResult{
			DecisionID: d.DecisionID, Disposition: d.Decision, Action: d.Action, Source: d.Source,
			Command: d.Input.Raw, RuleIDs: rules,
			PolicyVersions: []policyVersion{{PolicyID: bashGuardPolicy, Version: d.Metadata.RulebookDigest}},
		},
		Flags: flags, sourceRef: newSourceRef(BashGuard, d.DecisionID, raw), SourceSchema: filepath.Base(schema),
		PolicyPath: d.Metadata.PolicyPath, EngineVersion: d.Metadata.OPAVersion,
	})
	if err != nil {
		return quarantine(BashGuard, raw, key, ReasonSchemaInvalid, "%v", err)
	}
	return ledger.IngestRecord{
		Source: string(BashGuard), Key: d.DecisionID, Digest: sha256.Sum256(raw.Bytes),
		File: raw.File, Record: raw.Record, Raw: raw.Bytes, KeepSource: true, Flags: flags,
		Entry: ledger.Record{SessionID: session, Entry: entry},
	}
}

// bashGuardSchemas are the forms of decision-output.v1 a decision may take
// (ingest/schemas/SOURCES.md), tried in this order: the base form, the
// seed's (the version acsledger implements: base plus unlock keys), and
// pi-opa-net's later one, which adds members (signals, more rule families,
// pi_opa_net_version, dry_run) but no longer states that a reason has a
// rule_id and a message.
var bashGuardSchemas = []string{schemas.BashGuardV1Base, schemas.BashGuardV1Seed, schemas.BashGuardV1Unlock}

// bashGuardSchema returns the first of bashGuardSchemas doc is valid
// against. Whatever form it takes, each of its reasons holds to the seed's
// Reason, which requires rule_id and message: the later form adds members
// to v1, it does not make a reason's rule optional (the entry names the
// rules that fired by rule_id).
func bashGuardSchema(doc any) (string, error) {
	var errs []string
	for _, schema := range bashGuardSchemas {
		err := schemas.Validate(schema, doc)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if schema == schemas.BashGuardV1Unlock {
			if err := seedReasons(doc); err != nil {
				return "", fmt.Errorf("%s: %w (the seed's decision-output.v1 requires rule_id and message)", schema, err)
			}
		}
		return schema, nil
	}
	return "", fmt.Errorf("valid against no decision-output.v1 schema: %s", strings.Join(errs, "; "))
}

// seedReasons checks the reasons of doc, valid against a decision-output.v1
// schema, for the members the seed's Reason requires.
func seedReasons(doc any) error {
	reasons, _ := doc.(map[string]any)["reasons"].([]any)
	for i, r := range reasons {
		for _, name := range []string{"rule_id", "message"} {
			if _, ok := r.(map[string]any)[name]; !ok {
				return fmt.Errorf("at /reasons/%d: missing property '%s'", i, name)
			}
		}
	}
	return nil
}

// BashGuardAuditMapper maps bash-guard audit lines. A line links to its
// decision by decision_id: when the decision was ingested before, the
// line goes to the decision's session and names its entry
// (decision_entry); otherwise to "bash-guard-audit:file:" + the base name
// of its file.
type BashGuardAuditMapper struct {
	Store Store
}

// auditLine is the audit-line format of pi-opa-net's src/pi/audit.ts.
type auditLine struct {
	DecisionID  *string   `json:"decision_id"`
	Decision    *string   `json:"decision"`
	Source      *string   `json:"source"`
	Command     *string   `json:"command"`
	RuleIDs     *[]string `json:"rule_ids"`
	EvaluatedAt *string   `json:"evaluated_at"`
	// The OTLP sink adds the version; the JSONL sink does not.
	Version *string `json:"pi_opa_net_version"`
}

var auditSources = []string{"opa", "fail-open", "fail-closed", "cached", "opa-unlocked", "fail-open-keyless", "unlock-filter-error"}

// Map implements Mapper.
func (m BashGuardAuditMapper) Map(ctx context.Context, raw Raw) ledger.IngestRecord {
	var a auditLine
	if q := decodeRecord(BashGuardAudit, raw, &a, "not an audit line"); q != nil {
		return *q
	}
	key := ""
	if a.DecisionID != nil {
		key = *a.DecisionID
	}
	if err := checkAuditLine(a); err != nil {
		return quarantine(BashGuardAudit, raw, key, ReasonSchemaInvalid, "%v", err)
	}
	session := "bash-guard-audit:file:" + filepath.Base(raw.File)
	var ref *entryRef
	if m.Store != nil {
		d, err := m.Store.IngestedByKey(ctx, string(BashGuard), key)
		if err == nil {
			session = d.SessionID
			ref = &entryRef{SessionID: d.SessionID, Position: d.Position, EntryHash: d.EntryHash.String()}
		} else if !errors.Is(err, ledger.ErrNotFound) {
			return quarantine(BashGuardAudit, raw, key, ReasonSchemaInvalid, "couldn't look up decision %s: %v", key, err)
		}
	}
	flags := bashGuardFlags(*a.Source)
	entry, err := json.Marshal(bashGuardEntry{
		EntryID: "bash-guard-audit:" + key, StepID: "bash-guard-audit:" + key, StepType: "ingest/bash-guard/audit",
		Timestamp: *a.EvaluatedAt,
		Decision: bashGuardResult{
			DecisionID: key, Disposition: *a.Decision, Source: *a.Source, Command: *a.Command, RuleIDs: *a.RuleIDs,
		},
		Flags: flags, DecisionEntry: ref, sourceRef: newSourceRef(BashGuardAudit, key, raw),
	})
	if err != nil {
		return quarantine(BashGuardAudit, raw, key, ReasonSchemaInvalid, "%v", err)
	}
	return ledger.IngestRecord{
		Source: string(BashGuardAudit), Key: key, Digest: sha256.Sum256(raw.Bytes),
		File: raw.File, Record: raw.Record, Raw: raw.Bytes, KeepSource: true, Flags: flags,
		Entry: ledger.Record{SessionID: session, Entry: entry},
	}
}

func checkAuditLine(a auditLine) error {
	for _, f := range []struct {
		name string
		v    *string
	}{{"decision_id", a.DecisionID}, {"decision", a.Decision}, {"source", a.Source}, {"command", a.Command}, {"evaluated_at", a.EvaluatedAt}} {
		if f.v == nil {
			return fmt.Errorf("missing member %q", f.name)
		}
	}
	if a.RuleIDs == nil {
		return errors.New(`missing member "rule_ids"`)
	}
	if *a.DecisionID == "" {
		return errors.New("decision_id is empty")
	}
	if *a.Decision != "allow" && *a.Decision != "deny" {
		return fmt.Errorf("decision %q is neither allow nor deny", *a.Decision)
	}
	if !slices.Contains(auditSources, *a.Source) {
		return fmt.Errorf("source %q is not a decision source", *a.Source)
	}
	if _, err := time.Parse(time.RFC3339Nano, *a.EvaluatedAt); err != nil {
		return fmt.Errorf("evaluated_at %q is not RFC 3339", *a.EvaluatedAt)
	}
	return nil
}

// strictDecode decodes one JSON value into v, refusing unknown members.
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
