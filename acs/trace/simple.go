package trace

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"
)

// CloudEventType is the CloudEvents type of an exported entry.
const CloudEventType = "com.github.acsledger.entry.v1"

// encodeACS writes {"acsledger": handle, "entry": ..., "response": ...,
// "params": ...}: the entry and its signed response exactly as stored, so
// that acsverify can hash the entry and check the response's signature.
func encodeACS(ev *Evidence, p *params) []byte {
	b := newBuf(len(ev.Entry) + len(ev.Response) + 256)
	b.open()
	b.key("acsledger")
	ev.handle(b)
	b.key("entry").raw(compact(ev.Entry))
	b.rawIf("response", ev.Response)
	if p != nil {
		b.key("params").raw(p.json)
	}
	b.close()
	return b.b
}

// encodeCloudEvent writes a CloudEvents 1.0 event in structured JSON mode:
// id the entry hash (unique per entry, and the idempotency key a receiver
// deduplicates on), source the log origin, subject SESSION/POSITION, time
// the entry's timestamp, data the entry with its decision.
func encodeCloudEvent(ev *Evidence, v *entryView, p *params) []byte {
	b := newBuf(len(v.entry) + len(ev.Response) + 512)
	b.open()
	b.key("specversion").str("1.0")
	b.key("id").str(ev.EntryHash)
	src := ev.Origin
	if src == "" {
		src = "acsledger"
	}
	b.key("source").str(src)
	b.key("type").str(CloudEventType)
	b.key("subject").str(ev.SessionID + "/" + strconv.FormatInt(ev.Position, 10))
	if t := ceTime(v, ev); t != "" {
		b.key("time").str(t)
	}
	b.key("datacontenttype").str("application/json")
	b.obj("data")
	b.key("acsledger")
	ev.handle(b)
	b.key("step_type").str(v.StepType)
	b.strIf("decision", v.disposition())
	b.key("entry").raw(v.entry)
	b.rawIf("response", ev.Response)
	if p != nil {
		b.key("params").raw(p.json)
	}
	b.close()
	b.close()
	return b.b
}

// ceTime is the CloudEvents time: the entry's timestamp when it is RFC
// 3339, else the commit time, else none (time is optional in CloudEvents).
func ceTime(v *entryView, ev *Evidence) string {
	if _, err := time.Parse(time.RFC3339Nano, v.Timestamp); err == nil {
		return v.Timestamp
	}
	if !ev.Committed.IsZero() {
		return ev.Committed.UTC().Format(time.RFC3339Nano)
	}
	return ""
}

// params is what Options let leave of a step's request params.
type params struct {
	tool string
	json []byte // {"tool": ..., "arguments": {...}}
}

// allowedParams picks from raw what opt allows: the tool name and the
// values of the allowed argument keys. It returns nil when nothing is
// allowed or there is nothing to give. Params that do not parse give
// nothing: they never leave by mistake.
func allowedParams(raw json.RawMessage, opt Options) *params {
	if len(raw) == 0 || (!opt.AllowTools && len(opt.AllowArgKeys) == 0) {
		return nil
	}
	var in struct {
		Payload struct {
			Tool struct {
				Name string `json:"name"`
			} `json:"tool"`
			Arguments map[string]json.RawMessage `json:"arguments"`
		} `json:"payload"`
	}
	if json.Unmarshal(raw, &in) != nil {
		return nil
	}
	p := &params{}
	b := newBuf(128)
	b.open()
	some := false
	if opt.AllowTools && in.Payload.Tool.Name != "" {
		p.tool = in.Payload.Tool.Name
		b.key("tool").str(p.tool)
		some = true
	}
	keys := make([]string, 0, len(opt.AllowArgKeys))
	for _, k := range opt.AllowArgKeys {
		if _, ok := in.Payload.Arguments[k]; ok && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if len(keys) > 0 {
		b.obj("arguments")
		for _, k := range keys {
			// ACS tool arguments are {value, provenance}; only the value
			// leaves. A bare value (a non-ACS writer) leaves as it is.
			a := in.Payload.Arguments[k]
			var wrapped struct {
				Value json.RawMessage `json:"value"`
			}
			if json.Unmarshal(a, &wrapped) == nil && len(wrapped.Value) > 0 {
				a = wrapped.Value
			}
			b.key(k).raw(compact(a))
		}
		b.close()
		some = true
	}
	b.close()
	if !some {
		return nil
	}
	p.json = b.b
	return p
}
