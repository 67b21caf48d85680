package trace

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/acsledger/acsledger/acs"
)

// OCSFVersion is the OCSF schema version the default (OCSF) events follow;
// OCSF15Version is the version of the OCSF15 events.
const (
	OCSFVersion   = "1.9.0"
	OCSF15Version = "1.5.0"
)

// ocsfVersion says which OCSF an event is written for.
type ocsfVersion int

const (
	ocsf15 ocsfVersion = iota
	ocsf19
)

// class is one OCSF event class with the activity an entry takes in it.
// Names are the OCSF 1.5 captions: the ACS mapping's "Application
// Activity" for 6002 is the category's caption, the class's is
// "Application Lifecycle", and "Inventory Info" is "Device Inventory Info"
// (docs/export.md).
type class struct {
	uid      int
	name     string
	activity int
	actName  string
}

var (
	classLogon      = class{3002, "Authentication", 1, "Logon"}
	classLogoff     = class{3002, "Authentication", 2, "Logoff"}
	classAppOther   = class{6002, "Application Lifecycle", 99, "Other"}
	classAppStart   = class{6002, "Application Lifecycle", 3, "Start"}
	classAppStop    = class{6002, "Application Lifecycle", 4, "Stop"}
	classLaunch     = class{1007, "Process Activity", 1, "Launch"}
	classTerminate  = class{1007, "Process Activity", 2, "Terminate"}
	classDSQuery    = class{6005, "Datastore Activity", 4, "Query"}
	classDSWrite    = class{6005, "Datastore Activity", 5, "Write"}
	classDSRead     = class{6005, "Datastore Activity", 1, "Read"}
	classDSOther    = class{6005, "Datastore Activity", 99, "Other"}
	classInventory  = class{5001, "Device Inventory Info", 1, "Log"}
	classLoad       = class{1005, "Module Activity", 1, "Load"}
	classUnload     = class{1005, "Module Activity", 2, "Unload"}
	classAuthorize  = class{3003, "Authorize Session", 1, "Assign Privileges"}
	classAuthzOther = class{3003, "Authorize Session", 99, "Other"}
	classAPIOther   = class{6003, "API Activity", 99, "Other"}
	classFinding    = class{2004, "Detection Finding", 1, "Create"}
)

// stepClasses is ocsf-mapping.json step_to_class, where the mapping gives
// an activity_id, and our choice of activity where it gives none; then the
// step types acsledger writes that ACS does not name (approver
// resolutions, ingested records), mapped to the nearest class.
var stepClasses = map[string]class{
	"steps/sessionStart":           classLogon,
	"steps/sessionEnd":             classLogoff,
	"steps/subagentStart":          classLogon,
	"steps/subagentStop":           classLogoff,
	"steps/userMessage":            classAppOther,
	"steps/agentResponse":          classAppOther,
	"steps/agentTrigger":           classAppOther,
	"steps/turnStart":              classAppStart,
	"steps/turnEnd":                classAppStop,
	"steps/toolCallRequest":        classLaunch,
	"steps/toolCallResult":         classTerminate,
	"steps/knowledgeRetrieval":     classDSQuery,
	"steps/memoryStore":            classDSWrite,
	"steps/memoryContextRetrieval": classDSRead,
	"steps/preCompact":             classDSOther,
	"steps/postCompact":            classDSOther,
	"steps/skillRegister":          classInventory,
	"steps/skillLoad":              classLoad,
	"steps/skillUnload":            classUnload,
	"agbom/snapshot":               classInventory,
	"agbom/changed":                classInventory,

	// acsledger's own and ingested step types (docs/export.md).
	"intent_extension":           classAuthorize,
	"ask_resolution":             classAuthzOther,
	"ingest/a2h/resolution":      classAuthzOther,
	"ingest/opa/decision":        classAPIOther,
	"ingest/bash-guard/decision": classLaunch,
	"ingest/bash-guard/audit":    classLaunch,
}

// StepTypes lists the step types with a class of their own; any other
// step type is an Application Lifecycle event with activity Other, except
// protocols/*/tools/call, a tool call.
func StepTypes() []string {
	out := make([]string, 0, len(stepClasses))
	for k := range stepClasses {
		out = append(out, k)
	}
	return out
}

func classOf(stepType string) class {
	if c, ok := stepClasses[stepType]; ok {
		return c
	}
	if strings.HasPrefix(stepType, "protocols/") && strings.HasSuffix(stepType, "/tools/call") {
		return classLaunch
	}
	return classAppOther
}

var categories = map[int]string{
	1: "System Activity",
	2: "Findings",
	3: "Identity & Access Management",
	5: "Discovery",
	6: "Application Activity",
}

// Severity is ocsf-mapping.json severity_mapping: the OCSF severity_id of a
// disposition. An entry with no ACS disposition is Informational.
func Severity(disposition string) (int, string) {
	switch disposition {
	case "modify":
		return 2, "Low"
	case "ask", "defer":
		return 3, "Medium"
	case "deny":
		return 4, "High"
	}
	return 1, "Informational"
}

// header writes the members every OCSF event starts with.
func header(b *buf, c class, v *entryView, ev *Evidence, uidSuffix string, ver ocsfVersion) {
	sev, sevName := Severity(v.disposition())
	b.key("activity_id").int(int64(c.activity))
	b.key("activity_name").str(c.actName)
	b.key("category_uid").int(int64(c.uid / 1000))
	b.key("category_name").str(categories[c.uid/1000])
	b.key("class_uid").int(int64(c.uid))
	b.key("class_name").str(c.name)
	b.key("type_uid").int(int64(c.uid*100 + c.activity))
	b.key("type_name").str(c.name + ": " + c.actName)
	b.key("severity_id").int(int64(sev))
	b.key("severity").str(sevName)
	b.key("time").int(v.time)
	msg := v.StepType
	if d := v.disposition(); d != "" {
		msg += " " + d
	}
	b.key("message").str(msg)
	b.obj("metadata")
	if ver == ocsf15 {
		b.key("version").str(OCSF15Version)
	} else {
		b.key("version").str(OCSFVersion)
	}
	b.obj("product").key("name").str("acsledger").key("vendor_name").str("acsledger").close()
	b.key("uid").str(ev.EntryHash + uidSuffix)
	b.key("correlation_uid").str(ev.SessionID)
	b.strIf("log_name", ev.Origin)
	b.strIf("original_time", v.Timestamp)
	switch {
	case ver == ocsf15 && c.uid == 2004:
		b.key("profiles").raw([]byte(`["incident"]`))
	case ver == ocsf19 && c.uid == 2004:
		b.key("profiles").raw([]byte(`["incident","record_integrity"]`))
	case ver == ocsf19:
		b.key("profiles").raw([]byte(`["record_integrity"]`))
	}
	b.close()
	actor(b, v, ev)
	provenanceEnrichment(b, v)
	if ver == ocsf19 {
		attestation(b, ev)
	}
}

// attestation writes the record_integrity profile's attestation_list (OCSF
// 1.9): one attestation, the Merkle log's, whose fingerprint is the
// entry's ACS §8.2 entry_hash. The log commits to the entry, not to this
// event, which is one view of it: the fingerprint is what a leaf of the
// log holds, so the entry (unmapped.acs.entry, or the ledger's copy) and
// its chain link reproduce it, and the receipt proves it in the log.
// chain_uid is the session, whose entries form the ACS hash chain; uid
// is the entry's leaf index in the log once anchored; authority_uid is the
// log's origin, which names the key that signs its checkpoints. OCSF 1.9's
// attestation has no member for a log position's proof: the receipt's
// location and the covering checkpoint are in unmapped.acsledger.
// docs/export.md, "Record integrity (OCSF 1.9)".
func attestation(b *buf, ev *Evidence) {
	b.key("attestation_list").raw([]byte{'['})
	b.open()
	if ev.LeafIndex != nil {
		b.key("uid").str(strconv.FormatUint(*ev.LeafIndex, 10))
	}
	b.strIf("authority_uid", ev.Origin)
	b.key("chain_uid").str(ev.SessionID)
	// fingerprint: SHA-256 (algorithm_id 3), hex (encoding_id 1); the
	// bytes hashed are ACS §8.2's (JCS of the entry, then the previous
	// entry_hash), which OCSF's serialization enum has no caption for.
	b.obj("fingerprint")
	b.key("algorithm_id").int(3).key("algorithm").str("SHA-256")
	b.key("encoding_id").int(1).key("encoding").str("Hex")
	b.key("serialization_id").int(99).key("serialization").str(EntryHashSerialization)
	b.key("value").str(ev.EntryHash)
	b.close()
	b.close()
	b.raw([]byte{']'})
}

// EntryHashSerialization is the attestation fingerprint's serialization
// (serialization_id 99, Other): the entry hash of ACS §8.2.
const EntryHashSerialization = "ACS entry_hash"

// actor writes the actor: the agent (ACS-Trace: actor.user.type_id 99, "AI
// Agent") and its session.
func actor(b *buf, v *entryView, ev *Evidence) {
	b.obj("actor")
	if v.agent != "" {
		b.key("user")
		agentObject(b, v)
	}
	b.obj("session").key("uid").str(ev.SessionID).close()
	b.close()
}

// provenanceEnrichment writes enrichments when the entry summarises the
// provenance its step carried: ocsf-mapping.json provenance_metadata
// requires the enrichment acs_provenance_origin. The entry holds the
// summary (ACS §8.3), not each provenance record, which is in the params:
// the value is the origins seen, comma-separated, and data the summary.
func provenanceEnrichment(b *buf, v *entryView) {
	var origins []string
	if len(v.ProvenanceSummary) > 0 {
		acs.JSONMembers(v.ProvenanceSummary, func(name, val []byte) bool {
			if string(name) == "origins_seen" {
				_ = json.Unmarshal(val, &origins)
				return false
			}
			return true
		})
	}
	if len(origins) == 0 {
		return
	}
	b.key("enrichments").raw([]byte{'['})
	b.open()
	b.key("name").str("acs_provenance_origin")
	b.key("value").str(strings.Join(origins, ","))
	b.key("data").raw(v.ProvenanceSummary)
	b.key("type").str("ACS provenance summary")
	b.close()
	b.raw([]byte{']'})
}

// agentObject writes the agent as an OCSF user (actor.user, an event's
// user) or as the device of System Activity and Inventory Info events (the
// ledger knows the agent, not the host it ran on): both carry the same
// members.
func agentObject(b *buf, v *entryView) {
	b.open()
	name := v.agent
	if name == "" {
		name = "unknown agent"
	} else {
		b.key("uid").str(v.agent)
	}
	b.key("name").str(name)
	b.key("type_id").int(99)
	b.key("type").str("AI Agent")
	b.close()
}

// encodeOCSF writes the step's event in the class the mapping gives.
func encodeOCSF(ev *Evidence, v *entryView, p *params, ver ocsfVersion) []byte {
	c := classOf(v.StepType)
	b := newBuf(2*len(v.entry) + 1024)
	b.open()
	header(b, c, v, ev, "", ver)
	switch c.uid {
	case 3002:
		b.key("user")
		agentObject(b, v)
		b.obj("session").key("uid").str(ev.SessionID).close()
		// The service the agent's session opens on: ACS (the class needs a
		// service or a dst_endpoint).
		b.obj("service").key("name").str("ACS").close()
	case 3003:
		b.key("user")
		agentObject(b, v)
		b.obj("session").key("uid").str(ev.SessionID).close()
		// The capabilities an approver granted (intent_extension); none
		// for a resolution that granted nothing.
		caps := v.Capabilities
		if len(caps) == 0 || caps[0] != '[' {
			caps = []byte("[]")
		}
		b.key("privileges").raw(caps)
	case 6002:
		app := v.agent
		if app == "" {
			app = "unknown agent"
		}
		b.obj("app").key("name").str(app).close()
	case 6003:
		op := v.Decision.Path
		if op == "" {
			op = "decision"
		}
		b.obj("api").key("operation").str(op).obj("service").key("name").str("opa").close().close()
		b.obj("src_endpoint").key("name").str("opa").close()
	case 6005:
		src := v.agent
		if src == "" {
			src = "unknown agent"
		}
		b.obj("src_endpoint").key("name").str(src).close()
		// Which store the step reads or writes is in the params; the
		// event names the kind only (the class needs a database, a
		// databucket or a table).
		kind := "Agent memory"
		if v.StepType == "steps/knowledgeRetrieval" {
			kind = "Knowledge source"
		}
		b.obj("database").key("name").str(kind).key("type_id").int(99).key("type").str(kind).close()
	case 1007:
		b.key("device")
		agentObject(b, v)
		b.obj("process").key("uid").str(v.StepID)
		if p != nil && p.tool != "" {
			b.key("name").str(p.tool)
		}
		b.close()
	case 1005:
		b.key("device")
		agentObject(b, v)
		b.obj("module").key("load_type_id").int(99).key("load_type").str("ACS skill").close()
	case 5001:
		b.key("device")
		agentObject(b, v)
	}
	unmapped(b, v, ev, p, v.entry, ver)
	b.close()
	return b.b
}

// unmapped writes the members OCSF has no attribute for: the ACS facts,
// with the entry itself when entry is not nil, and the evidence handle.
func unmapped(b *buf, v *entryView, ev *Evidence, p *params, entry json.RawMessage, ver ocsfVersion) {
	b.obj("unmapped")
	b.obj("acs")
	acsFacts(b, v, ev, p)
	if entry != nil {
		b.key("entry").raw(entry)
	}
	b.close()
	b.key("acsledger")
	if ver == ocsf15 {
		ev.handle(b)
	} else {
		ev.handleIntegrity(b)
	}
	b.close()
}

// encodeFinding writes the Detection Finding (2004) of a deny, modify,
// ask or defer decision (ocsf-mapping.json decision_class).
func encodeFinding(ev *Evidence, v *entryView, p *params, ver ocsfVersion) []byte {
	d := v.disposition()
	b := newBuf(len(v.entry) + 1024)
	b.open()
	header(b, classFinding, v, ev, "/finding", ver)
	b.obj("finding_info")
	b.key("uid").str(ev.EntryHash)
	b.key("title").str(findingTitle(v.StepType, d))
	b.strIf("desc", v.Decision.Reasoning)
	b.close()
	b.key("is_alert").bool(true)
	b.key("verdict_id").int(99)
	b.key("verdict").str(d)
	b.key("evidences").raw([]byte{'['})
	b.open()
	actor(b, v, ev)
	b.key("name").str(v.StepType)
	b.key("uid").str(v.StepID)
	b.key("verdict_id").int(99)
	b.key("verdict").str(d)
	b.close()
	b.raw([]byte{']'})
	unmapped(b, v, ev, p, nil, ver)
	b.close()
	return b.b
}

var verbs = map[string]string{"deny": "denied", "modify": "modified", "ask": "held for approval", "defer": "deferred"}

func findingTitle(stepType, d string) string {
	return stepType + " " + verbs[d]
}

// acsFacts writes the members of unmapped.acs (extend_ocsf.md: the ACS
// facts OCSF has no place for), before the entry itself.
func acsFacts(b *buf, v *entryView, ev *Evidence, p *params) {
	b.key("session_id").str(ev.SessionID)
	b.key("step_id").str(v.StepID)
	b.obj("step").key("id").str(v.StepID).key("type").str(v.StepType)
	b.strIf("turn_id", v.TurnID)
	b.close()
	b.key("entry_id").str(v.EntryID)
	b.strIf("agent_id", v.agent)
	b.strIf("decision", v.disposition())
	b.strIf("reasoning", v.Decision.Reasoning)
	b.rawIf("reason_codes", v.Decision.ReasonCodes)
	b.rawIf("policy_references", v.Decision.PolicyReferences)
	b.rawIf("policy_versions", v.Decision.PolicyVersions)
	b.rawIf("rule_ids", v.Decision.RuleIDs)
	b.strIf("resolution", v.Resolution.Resolution)
	b.rawIf("provenance_summary", v.ProvenanceSummary)
	if p != nil {
		b.key("params").raw(p.json)
	}
}
