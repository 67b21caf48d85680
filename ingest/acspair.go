package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/json"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/ledger"
)

// ACSMapper maps another ACS Guardian's traffic: JSONL of {"request":
// <envelope>, "response": <envelope>} pairs. The ledger recomputes the
// entry of each pair and appends it to the request's session
// (params.metadata.session_id); the response, whose signature is checked
// against Keys, is stored beside the entry as the Guardian's signed
// response, and its result.chain_hash must equal the head the ledger
// computed (ledger.ReasonChainMismatch otherwise). The request's params are
// stored beside the entry as a Guardian step's are.
//
// The entry is the pair entry (docs/ingest.md): entry_id and step_id the
// request_id, step_type the method, timestamp the request's, request_hash
// (ACS §8.1), agent_id, and decision {disposition, reason_codes} from the
// result. A pair may instead carry the Guardian's own ContextEntry as
// member "entry"; its step_id, step_type and request_hash must then match
// the pair, and it is chained as given.
type ACSMapper struct {
	Keys *sig.KeySet
}

type acsPair struct {
	Request  json.RawMessage `json:"request"`
	Response json.RawMessage `json:"response"`
	Entry    json.RawMessage `json:"entry"`
}

type acsRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

type acsParams struct {
	RequestID string `json:"request_id"`
	Timestamp string `json:"timestamp"`
	Metadata  struct {
		AgentID   string `json:"agent_id"`
		SessionID string `json:"session_id"`
		TurnID    string `json:"turn_id"`
	} `json:"metadata"`
}

type acsResponse struct {
	Result *struct {
		RequestID   string   `json:"request_id"`
		Decision    string   `json:"decision"`
		ReasonCodes []string `json:"reason_codes"`
		ChainHash   string   `json:"chain_hash"`
	} `json:"result"`
}

// pairEntry is the entry the ledger computes for a pair.
type pairEntry struct {
	acs.EntryHead
	AgentID  string       `json:"agent_id"`
	TurnID   string       `json:"turn_id,omitempty"`
	Decision pairDecision `json:"decision"`
}

type pairDecision struct {
	Disposition string   `json:"disposition"`
	ReasonCodes []string `json:"reason_codes"`
}

// ACSKeyOf returns the natural key of a pair: (session_id, request_id) as
// a JSON array.
func ACSKeyOf(sessionID, requestID string) string {
	return naturalKey(sessionID, requestID)
}

// Map implements Mapper.
func (m ACSMapper) Map(_ context.Context, raw Raw) ledger.IngestRecord {
	if q := malformed(ACS, raw); q != nil {
		return *q
	}
	var p acsPair
	if err := strictDecode(raw.Bytes, &p); err != nil || len(p.Request) == 0 || len(p.Response) == 0 {
		return quarantine(ACS, raw, "", ReasonSchemaInvalid, "not a {request, response} pair")
	}
	var req acsRequest
	var params acsParams
	if json.Unmarshal(p.Request, &req) != nil || req.Method == "" || firstByte(req.Params) != '{' || json.Unmarshal(req.Params, &params) != nil {
		return quarantine(ACS, raw, "", ReasonSchemaInvalid, "the request is not an ACS request envelope with a method and params")
	}
	session, requestID := params.Metadata.SessionID, params.RequestID
	if session == "" || requestID == "" {
		return quarantine(ACS, raw, "", ReasonSchemaInvalid, "the request names no params.metadata.session_id or params.request_id")
	}
	key := ACSKeyOf(session, requestID)
	var resp acsResponse
	if json.Unmarshal(p.Response, &resp) != nil || resp.Result == nil {
		return quarantine(ACS, raw, key, ReasonSchemaInvalid, "the response is not an ACS result envelope (an error response chains no entry)")
	}
	if resp.Result.RequestID != requestID {
		return quarantine(ACS, raw, key, ReasonSchemaInvalid, "the response answers request %q, not %q", resp.Result.RequestID, requestID)
	}
	head, err := acs.ParseHash(resp.Result.ChainHash)
	if err != nil {
		return quarantine(ACS, raw, key, ReasonSchemaInvalid, "the response's chain_hash: %v", err)
	}
	if m.Keys == nil {
		return quarantine(ACS, raw, key, ReasonSignatureInvalid, "no keys are configured for this Guardian")
	}
	if _, err := sig.VerifyEnvelope(p.Response, m.Keys, session); err != nil {
		return quarantine(ACS, raw, key, ReasonSignatureInvalid, "response: %v", err)
	}
	reqHash, err := acs.RequestHash(req.Params)
	if err != nil {
		return quarantine(ACS, raw, key, ReasonMalformedJSON, "request params: %v", err)
	}
	var entry []byte
	if len(p.Entry) > 0 {
		e, err := acs.ParseEntry(p.Entry)
		switch {
		case err != nil:
			return quarantine(ACS, raw, key, ReasonSchemaInvalid, "entry: %v", err)
		case e.StepID != requestID || e.StepType != req.Method:
			return quarantine(ACS, raw, key, ReasonSchemaInvalid, "the entry is step %q of type %q, not %q of type %q", e.StepID, e.StepType, requestID, req.Method)
		case !hasRequestHash(e.Content, reqHash):
			return quarantine(ACS, raw, key, ReasonSchemaInvalid, "the entry's request_hash is not %s, the hash of the request's params", reqHash)
		}
		// Chain links are the ledger's to compute.
		entry = e.Content
	} else {
		codes := resp.Result.ReasonCodes
		if codes == nil {
			codes = []string{}
		}
		entry, err = json.Marshal(pairEntry{
			EntryHead: acs.EntryHead{EntryID: requestID, StepID: requestID, StepType: req.Method, Timestamp: params.Timestamp,
				RequestHash: reqHash.String()},
			AgentID: params.Metadata.AgentID, TurnID: params.Metadata.TurnID,
			Decision: pairDecision{Disposition: resp.Result.Decision, ReasonCodes: codes},
		})
		if err != nil {
			return quarantine(ACS, raw, key, ReasonSchemaInvalid, "%v", err)
		}
	}
	return ledger.IngestRecord{
		Source: string(ACS), Key: key, Digest: sha256.Sum256(raw.Bytes),
		File: raw.File, Record: raw.Record, Raw: raw.Bytes,
		Entry:    ledger.Record{SessionID: session, AgentID: params.Metadata.AgentID, Entry: entry},
		Response: []byte(p.Response), Params: []byte(req.Params), Head: &head,
	}
}

// hasRequestHash reports whether a canonical entry's request_hash is h.
func hasRequestHash(content []byte, h acs.Hash) bool {
	var e struct {
		RequestHash string `json:"request_hash"`
	}
	return json.Unmarshal(content, &e) == nil && e.RequestHash == h.String()
}
