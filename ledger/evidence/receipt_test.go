package evidence_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/guardian"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/ledger/tlog"
	"github.com/acsledger/acsledger/verify"
)

// receiptTrust is what an auditor holding the deployment's keys trusts.
func receiptTrust(t testing.TB, f *evidencetest.Fixture, witnesses ...string) *verify.ReceiptTrust {
	t.Helper()
	ks, err := sig.NewKeySet(f.HMAC.Public(), f.ECDSA.Public())
	if err != nil {
		t.Fatal(err)
	}
	tr := &verify.ReceiptTrust{ResponseKeys: ks, Checkpoint: verify.CheckpointPolicy{LogKeys: []string{f.LogVerifier}}}
	if len(witnesses) > 0 {
		tr.Checkpoint.Witnesses, tr.Checkpoint.WitnessQuorum = witnesses, len(witnesses)
	}
	return tr
}

func receipt(t *testing.T, f *evidencetest.Fixture, session string, pos int64) []byte {
	t.Helper()
	b, err := evidence.Receipt(context.Background(), f.Store, f.Log, session, pos)
	if err != nil {
		t.Fatalf("Receipt(%s, %d): %v", session, pos, err)
	}
	return b
}

func TestReceiptVerifies(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			for _, session := range []string{f.HMACSession, f.ECDSASession} {
				sess, err := f.Store.Session(context.Background(), session)
				if err != nil {
					t.Fatal(err)
				}
				for pos := range sess.Length {
					doc := receipt(t, f, session, pos)
					rep, err := verify.VerifyReceipt(doc, receiptTrust(t, f), nil)
					if err != nil {
						t.Fatalf("VerifyReceipt: %v\n%s", err, doc)
					}
					es, _ := f.Store.Entries(context.Background(), session, pos, 1)
					if !rep.Verified || rep.SessionID != session || rep.Position != uint64(pos) || rep.EntryHash != es[0].EntryHash.String() || !rep.Response {
						t.Fatalf("report %+v for %s/%d (entry_hash %s)", rep, session, pos, es[0].EntryHash)
					}
					if len(rep.Notices) != 0 {
						t.Errorf("notices with full trust: %v", rep.Notices)
					}
					// The decision the receipt proves is the Guardian's.
					for _, s := range f.Steps {
						if s.RequestID == rep.StepID && !strings.EqualFold(s.Decision, rep.Decision) {
							t.Errorf("receipt proves %q, the Guardian answered %q", rep.Decision, s.Decision)
						}
					}
					independentCheck(t, doc, f.LogVerifier, session, pos, es[0].EntryHash.String())
					// Nothing of another entry: the entry_hash of every
					// other entry of the session is absent.
					all, _ := f.Store.Entries(context.Background(), session, 0, 100)
					for _, o := range all {
						if o.Position != pos && bytes.Contains(extraOf(t, doc), []byte(o.EntryHash.String())) && (pos == 0 || o.Position != pos-1) {
							t.Errorf("receipt of position %d discloses entry %d", pos, o.Position)
						}
					}
				}
			}
			// Without a response key the response is not checked, and the
			// report says so.
			doc := receipt(t, f, f.ECDSASession, 0)
			rep, err := verify.VerifyReceipt(doc, &verify.ReceiptTrust{Checkpoint: verify.CheckpointPolicy{LogKeys: []string{f.LogVerifier}}}, nil)
			if err != nil || !rep.Verified || len(rep.Notices) != 1 || rep.Notices[0].Code != verify.CodeResponseNotChecked {
				t.Errorf("without --trust: %v %+v", err, rep)
			}
		})
	}
}

func extraOf(t *testing.T, doc []byte) []byte {
	t.Helper()
	line := strings.Split(string(doc), "\n")[1]
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(line, "extra "))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// independentCheck reads a receipt as c2sp.org/tlog-proof@v1 describes
// it, without the production parser or proof code: the header line, an
// optional "extra <base64>" line, "index N", base64 SHA-256 hashes from the
// leaf's sibling up, an empty line, the checkpoint verbatim. It opens the
// checkpoint with sumdb/note alone, rebuilds the leaf from the extra data
// (docs/merkle-log.md) and the root from the proof by RFC 6962 §2.1.1.
func independentCheck(t *testing.T, doc []byte, vkey, session string, pos int64, entryHash string) {
	t.Helper()
	text := string(doc)
	head, checkpoint, ok := strings.Cut(text, "\n\n")
	if !ok {
		t.Fatal("no empty line")
	}
	lines := strings.Split(head, "\n")
	if lines[0] != "c2sp.org/tlog-proof@v1" || !strings.HasPrefix(lines[1], "extra ") || !strings.HasPrefix(lines[2], "index ") {
		t.Fatalf("header lines %q", lines[:3])
	}
	var extra struct {
		SessionID string          `json:"session_id"`
		Position  int64           `json:"position"`
		Entry     json.RawMessage `json:"entry"`
	}
	if err := json.Unmarshal(extraOf(t, doc), &extra); err != nil {
		t.Fatal(err)
	}
	var entry struct {
		EntryHash string `json:"entry_hash"`
	}
	if err := json.Unmarshal(extra.Entry, &entry); err != nil {
		t.Fatal(err)
	}
	if extra.SessionID != session || extra.Position != pos || entry.EntryHash != entryHash {
		t.Fatalf("extra names %s/%d %s", extra.SessionID, extra.Position, entry.EntryHash)
	}
	index, err := strconv.ParseUint(strings.TrimPrefix(lines[2], "index "), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	var path [][]byte
	for _, l := range lines[3:] {
		h, err := base64.StdEncoding.DecodeString(l)
		if err != nil || len(h) != 32 {
			t.Fatalf("proof line %q", l)
		}
		path = append(path, h)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open([]byte(checkpoint), note.VerifierList(v))
	if err != nil {
		t.Fatalf("sumdb/note rejects the checkpoint: %v", err)
	}
	body := strings.Split(n.Text, "\n")
	size, _ := strconv.ParseUint(body[1], 10, 64)
	root, _ := base64.StdEncoding.DecodeString(body[2])
	// The leaf: SHA-256(0x00 || JCS of the four members, sorted).
	sessJSON, _ := json.Marshal(session)
	leafData := fmt.Sprintf(`{"entry_hash":"%s","position":%d,"session_id":%s,"v":1}`, entryHash, pos, sessJSON)
	h := sha256.Sum256(append([]byte{0}, leafData...))
	node := h[:]
	// RFC 9162 §2.1.3.2, the verification of an inclusion proof.
	fn, sn := index, size-1
	if index >= size {
		t.Fatalf("index %d, size %d", index, size)
	}
	for _, p := range path {
		if sn == 0 {
			t.Fatal("proof too long")
		}
		if fn&1 == 1 || fn == sn {
			node = interior(p, node)
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn >>= 1
					sn >>= 1
				}
			}
		} else {
			node = interior(node, p)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 || !bytes.Equal(node, root) {
		t.Fatalf("independent reader: proof of leaf %d does not lead to the checkpoint's root", index)
	}
}

func interior(l, r []byte) []byte {
	h := sha256.New()
	h.Write([]byte{1})
	h.Write(l)
	h.Write(r)
	return h.Sum(nil)
}

// cosign has a witness key cosign the log's checkpoint of size and stores
// the line, as the log does with a witness's answer.
func cosign(t testing.TB, f *evidencetest.Fixture, name string, seed byte, size uint64) string {
	t.Helper()
	skey, vkey, err := tlog.KeyFromSeed(name, tlog.CosignatureEd25519, [32]byte{seed})
	if err != nil {
		t.Fatal(err)
	}
	s, err := tlog.NewSigner(skey, nil)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := f.Store.LogStorage().Checkpoint(context.Background(), size)
	if err != nil {
		t.Fatal(err)
	}
	text, _, _ := bytes.Cut(signed, []byte("\n\n"))
	out, err := note.Sign(&note.Note{Text: string(text) + "\n"}, s)
	if err != nil {
		t.Fatal(err)
	}
	_, line, _ := bytes.Cut(out, []byte("\n\n"))
	if err := f.Store.LogStorage().AddCosignature(context.Background(), size, line); err != nil {
		t.Fatal(err)
	}
	return vkey
}

// failed reports whether a receipt does not verify: unreadable, or
// with findings.
func failed(doc []byte, trust *verify.ReceiptTrust) bool {
	rep, err := verify.VerifyReceipt(doc, trust, nil)
	return err != nil || !rep.Verified
}

func TestReceiptMangled(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	_, cp := f.Checkpoint(t)
	trusted := cosign(t, f, "witness1.test", 7, cp.Size)
	cosign(t, f, "stranger.test", 8, cp.Size)
	doc := receipt(t, f, f.ECDSASession, 1)

	t.Run("witnesses", func(t *testing.T) {
		// The untrusted witness's line is ignored; the trusted one's
		// counts toward the quorum.
		if failed(doc, receiptTrust(t, f, trusted)) || failed(doc, receiptTrust(t, f)) {
			t.Fatal("the receipt does not verify with its witness trusted")
		}
		_, other, _ := tlog.KeyFromSeed("witness2.test", tlog.CosignatureEd25519, [32]byte{9})
		rep, err := verify.VerifyReceipt(doc, receiptTrust(t, f, other), nil)
		if err != nil || rep.Verified || rep.Findings[0].Code != verify.CodeWitnessQuorumNotMet {
			t.Fatalf("with only an absent witness trusted: %v %+v", err, rep)
		}
	})

	t.Run("every byte", func(t *testing.T) {
		// Without the untrusted witness's line, which a verifier ignores,
		// every byte is covered by a signature or a hash.
		lines := strings.SplitAfter(string(doc), "\n")
		var kept []string
		for _, l := range lines {
			if !strings.HasPrefix(l, "— stranger.test ") {
				kept = append(kept, l)
			}
		}
		base := []byte(strings.Join(kept, ""))
		trust := receiptTrust(t, f, trusted)
		if failed(base, trust) {
			t.Fatal("the receipt does not verify before mangling")
		}
		for i := range base {
			m := bytes.Clone(base)
			m[i] ^= 0x01
			if !failed(m, trust) {
				t.Fatalf("flipping bit 0 of byte %d (%q in %q) still verifies", i, base[i], lineAround(base, i))
			}
		}
		if !failed(append(bytes.Clone(base), '\n'), trust) {
			t.Error("a trailing newline still verifies")
		}
		if !failed(base[:len(base)-1], trust) {
			t.Error("a truncated receipt still verifies")
		}
	})

	t.Run("moved", func(t *testing.T) {
		// The receipt of position 1 given the index (and then the
		// proof) of another entry's leaf.
		other := receipt(t, f, f.ECDSASession, 0)
		idx := func(d []byte) string { return strings.Split(string(d), "\n")[2] }
		moved := strings.Replace(string(doc), idx(doc), idx(other), 1)
		rep, err := verify.VerifyReceipt([]byte(moved), receiptTrust(t, f), nil)
		if err != nil || rep.Verified || rep.Findings[0].Code != verify.CodeInclusionProofInvalid {
			t.Fatalf("moved to %s: %v %+v", idx(other), err, rep)
		}
		// The other entry's whole proof under this entry's extra data.
		swapped := strings.Replace(string(other), strings.Split(string(other), "\n")[1], strings.Split(string(doc), "\n")[1], 1)
		rep, err = verify.VerifyReceipt([]byte(swapped), receiptTrust(t, f), nil)
		if err != nil || rep.Verified || rep.Findings[0].Code != verify.CodeInclusionProofInvalid {
			t.Fatalf("extra data moved onto another entry's proof: %v %+v", err, rep)
		}
	})
}

func lineAround(b []byte, i int) string {
	s := bytes.LastIndexByte(b[:i], '\n') + 1
	e := bytes.IndexByte(b[i:], '\n')
	if e < 0 {
		e = len(b) - i
	}
	out := string(b[s : i+e])
	if len(out) > 80 {
		out = out[:80] + "..."
	}
	return out
}

func TestReceiptFirstCheckpointAndLater(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			ctx := context.Background()
			_, first := f.Checkpoint(t)
			before := receipt(t, f, f.HMACSession, 0)

			// A new step is not anchored until the log integrates it.
			f.Call(t, f.ECDSASession, "steps/toolCallRequest", map[string]any{"tool": map[string]any{"name": "list_dir"}, "arguments": map[string]any{}})
			sess, _ := f.Store.Session(ctx, f.ECDSASession)
			_, err := evidence.Receipt(ctx, f.Store, f.Log, f.ECDSASession, sess.Length-1)
			if !errors.Is(err, evidence.ErrNotAnchored) {
				t.Fatalf("unanchored entry: %v, want ErrNotAnchored", err)
			}
			if _, err := evidence.Receipt(ctx, f.Store, f.Log, f.ECDSASession, sess.Length); !errors.Is(err, ledger.ErrNotFound) {
				t.Fatalf("past the chain's end: %v, want ErrNotFound", err)
			}
			if _, err := evidence.Receipt(ctx, f.Store, f.Log, "no-such-session", 0); !errors.Is(err, ledger.ErrNotFound) {
				t.Fatalf("unknown session: %v, want ErrNotFound", err)
			}
			f.Integrate(t)
			newerSigned, newer := f.Checkpoint(t)
			if newer.Size <= first.Size {
				t.Fatalf("no newer checkpoint: %d after %d", newer.Size, first.Size)
			}
			// The old entry's receipt is the same: it names the first
			// checkpoint that covered it, not the latest.
			after := receipt(t, f, f.HMACSession, 0)
			if !bytes.Equal(before, after) {
				t.Fatalf("receipt changed as the log grew:\n%s\n---\n%s", before, after)
			}
			last := receipt(t, f, f.ECDSASession, sess.Length-1)
			if rep, err := verify.VerifyReceipt(last, receiptTrust(t, f), nil); err != nil || !rep.Verified || rep.TreeSize != newer.Size {
				t.Fatalf("new entry's receipt: %v %+v", err, rep)
			}

			// A newer checkpoint with the consistency proof to it.
			p, err := f.Log.ConsistencyProof(ctx, first.Size, newer.Size)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := verify.VerifyReceipt(after, receiptTrust(t, f), &verify.NewerCheckpoint{Signed: newerSigned, Consistency: p})
			if err != nil || !rep.Verified || rep.NewerTreeSize != newer.Size {
				t.Fatalf("with the newer checkpoint: %v %+v", err, rep)
			}
			bad := [][]byte{bytes.Repeat([]byte{1}, 32)}
			rep, err = verify.VerifyReceipt(after, receiptTrust(t, f), &verify.NewerCheckpoint{Signed: newerSigned, Consistency: bad})
			if err != nil || rep.Verified || rep.Findings[0].Code != verify.CodeConsistencyProofInvalid {
				t.Fatalf("with a wrong consistency proof: %v %+v", err, rep)
			}
		})
	}
}

// TestAgentReceipt asks the Guardian for receipts with the ACS method
// system/acsledger/receipt, signed by the session's own key: by step_id
// and by position the same receipt as the auditor's, signed by the
// session's response key; nothing of another session; not_anchored with
// when to retry before the log integrates; malformed payloads refused.
func TestAgentReceipt(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	step := f.Step(t, "steps/toolCallRequest", "deny")
	want := receipt(t, f, step.SessionID, 1)
	ask := func(session string, payload any) (result map[string]any, errData map[string]any, raw []byte) {
		t.Helper()
		_, raw = f.CallRaw(t, session, guardian.MethodReceipt, payload)
		var r struct {
			Result map[string]any `json:"result"`
			Error  *struct {
				Code int            `json:"code"`
				Data map[string]any `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("%s", raw)
		}
		if r.Error != nil {
			return nil, r.Error.Data, raw
		}
		return r.Result, nil, raw
	}
	for _, p := range []map[string]any{{"step_id": step.RequestID}, {"position": 1}} {
		res, _, raw := ask(step.SessionID, p)
		pl, _ := res["payload"].(map[string]any)
		if pl == nil || pl["receipt"] != string(want) || res["signature"] == nil {
			t.Fatalf("%v: %s", p, raw)
		}
	}
	// The answer is signed like every response of the session.
	_, raw := f.CallRaw(t, step.SessionID, guardian.MethodReceipt, map[string]any{"position": 1})
	ks, _ := sig.NewKeySet(f.HMAC.Public(), f.ECDSA.Public())
	if _, err := sig.VerifyEnvelope(raw, ks, step.SessionID); err != nil {
		t.Fatalf("the answer's signature: %v", err)
	}
	other := f.HMACSession
	if other == step.SessionID {
		other = f.ECDSASession
	}
	for _, c := range []struct {
		session string
		payload any
		reason  string
	}{
		{other, map[string]any{"step_id": step.RequestID}, "no_such_step"},
		{step.SessionID, map[string]any{"position": 99}, "no_such_step"},
		{step.SessionID, map[string]any{"position": 1, "step_id": step.RequestID}, "invalid_params"},
		{step.SessionID, map[string]any{}, "invalid_params"},
		{step.SessionID, map[string]any{"position": -1}, "invalid_params"},
		{step.SessionID, map[string]any{"session_id": other, "position": 0}, "invalid_params"},
	} {
		if _, data, raw := ask(c.session, c.payload); data == nil || data["reason"] != c.reason || strings.Contains(string(raw), "tlog-proof") {
			t.Errorf("%v: %s, want reason %s", c.payload, raw, c.reason)
		}
	}
	f.Call(t, step.SessionID, "steps/toolCallRequest", map[string]any{"tool": map[string]any{"name": "list_dir"}, "arguments": map[string]any{}})
	sess, _ := f.Store.Session(context.Background(), step.SessionID)
	_, data, raw := ask(step.SessionID, map[string]any{"position": sess.Length - 1})
	if data == nil || data["reason"] != "not_anchored" || data["retry_after_ms"] != float64(1000) {
		t.Fatalf("unanchored: %s", raw)
	}
}
