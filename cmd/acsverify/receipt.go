package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/acsledger/acsledger/verify"
)

const receiptArgs = "[--format auto|tlog-proof|cose] --log-key KEY [--trust KEYFILE ...] [--hmac-ikm KEY_ID=HEX ...] [--checkpoint NEWER (--consistency PROOF | --bundle B) | --log-dir DIR] [--tsa-cert FILE] [--require-timestamp] [--json] FILE.tlog-proof|FILE.cose"

// receipt verifies one entry's receipt (docs/receipts.md) offline.
func receipt(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("receipt", receiptArgs, stderr)
	asJSON := fs.Bool("json", false, "print a machine-readable JSON report")
	format := fs.String("format", "auto", "the receipt's form: tlog-proof (c2sp.org/tlog-proof text), cose (a COSE_Sign1 transparent statement with an RFC 9942 receipt) or auto (a tagged COSE_Sign1 is cose, anything else tlog-proof)")
	var logKeys, trustFiles, ikms multiFlag
	fs.Var(&logKeys, "log-key", "the log's note verifier key as `acsledger log-key` prints it, or a file holding that output (repeatable; every key given must have signed)")
	fs.Var(&trustFiles, "trust", "a .pub.json response key file, or a trust file (the shape of a bundle's \"keys\": response keys, log keys, witnesses and quorum) (repeatable)")
	fs.Var(&ikms, "hmac-ikm", "HMAC-SHA256 input keying material as KEY_ID=HEX (repeatable)")
	newer := fs.String("checkpoint", "", "a newer checkpoint of the log you hold (a signed note file); checks the receipt's checkpoint is consistent with it")
	consistency := fs.String("consistency", "", "with --checkpoint: the consistency proof from the receipt's tree to the newer one, as GET /api/v1/proofs/consistency answers (JSON)")
	logDir := fs.String("log-dir", "", "a local copy `DIR` of the published log (its C2SP paths: checkpoint, tile/...; e.g. aws s3 sync of the bucket serve --publish writes): its checkpoint must extend the receipt's, proven from its tiles (docs/object-storage.md)")
	bundleFile := fs.String("bundle", "", "an evidence bundle exported with since_size=<the receipt's tree size>: its consistency proof (and, without --checkpoint, its latest checkpoint) are used")
	tsaCert := fs.String("tsa-cert", "", "PEM file of the RFC 3161 time-stamping authority's certificate or its CA: the receipt's time-stamp must chain to it (timestamp_invalid)")
	requireTS := fs.Bool("require-timestamp", false, "fail with timestamp_missing unless the receipt carries a valid RFC 3161 time-stamp of its checkpoint")
	if !parseFileArg(fs, args) {
		return exitInput
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "acsverify receipt: "+format+"\n", a...)
		return exitInput
	}
	switch *format {
	case "auto", "tlog-proof", "cose":
	default:
		return fail("--format %q is none of auto, tlog-proof, cose", *format)
	}
	if len(logKeys) == 0 {
		return fail("--log-key is required: the receipt's checkpoint is only as good as the key that signed it")
	}
	if *consistency != "" && *bundleFile != "" {
		return fail("give --consistency or --bundle, not both")
	}
	if *newer != "" && *consistency == "" && *bundleFile == "" {
		return fail("--checkpoint needs --consistency or --bundle: the proof that the newer tree extends the receipt's")
	}
	if *logDir != "" && (*newer != "" || *consistency != "" || *bundleFile != "") {
		return fail("give --log-dir or --checkpoint/--consistency/--bundle, not both")
	}
	if *consistency != "" && *newer == "" {
		return fail("--consistency needs --checkpoint, the newer checkpoint it leads to")
	}
	t, err := readTrust(trustFiles)
	if err == nil {
		err = hmacKeys(t.ResponseKeys, ikms)
	}
	if err != nil {
		return fail("%v", err)
	}
	trust := &verify.ReceiptTrust{Checkpoint: t.Checkpoint, RequireTimestamp: *requireTS}
	if *tsaCert != "" {
		b, err := os.ReadFile(*tsaCert)
		if err == nil {
			trust.TSARoots, err = verify.ParseTSACerts(b)
		}
		if err != nil {
			return fail("--tsa-cert: %v", err)
		}
	}
	if len(t.ResponseKeys.KeyIDs()) > 0 {
		trust.ResponseKeys = t.ResponseKeys
	}
	for _, k := range logKeys {
		keys, err := readLogKeys(k)
		if err != nil {
			return fail("--log-key: %v", err)
		}
		trust.Checkpoint.LogKeys = append(trust.Checkpoint.LogKeys, keys...)
	}

	in, name, closeIn, err := openInput(fs.Arg(0), stdin)
	if err != nil {
		return fail("%v", err)
	}
	doc, err := io.ReadAll(io.LimitReader(in, verify.MaxReceiptSize+1))
	closeIn()
	if err != nil {
		return fail("%s: %v", name, err)
	}
	if *format == "cose" || *format == "auto" && verify.IsCOSE(doc) {
		if *newer != "" || *bundleFile != "" || *logDir != "" || *tsaCert != "" || *requireTS {
			return fail("%s: a COSE receipt carries no checkpoint note or time-stamp: --checkpoint, --bundle, --tsa-cert and --require-timestamp apply to the tlog-proof form only", name)
		}
		rep, err := verify.VerifyCOSEReceipt(doc, trust)
		if err != nil {
			return fail("%s: %v", name, err)
		}
		return printReceipt(name, rep, *asJSON, stdout, stderr)
	}
	var nc *verify.NewerCheckpoint
	if *logDir != "" {
		if nc, err = logDirCheckpoint(doc, *logDir); err != nil {
			return fail("%v", err)
		}
	} else if *newer != "" || *bundleFile != "" {
		if nc, err = newerCheckpoint(doc, *newer, *consistency, *bundleFile); err != nil {
			return fail("%v", err)
		}
	}
	rep, err := verify.VerifyReceipt(doc, trust, nc)
	if err != nil {
		return fail("%s: %v", name, err)
	}
	return printReceipt(name, rep, *asJSON, stdout, stderr)
}

// readLogKeys reads --log-key: a verifier key, or a file holding one per
// line (the output of `acsledger log-key`, whose "origin:" line is
// skipped).
func readLogKeys(v string) ([]string, error) {
	if _, err := verify.NoteVerifier(v); err == nil {
		return []string{v}, nil
	}
	b, err := os.ReadFile(v)
	if err != nil {
		return nil, fmt.Errorf("%q is neither a note verifier key nor a readable file: %v", v, err)
	}
	var keys []string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "origin:") {
			continue
		}
		if _, err := verify.NoteVerifier(line); err != nil {
			return nil, fmt.Errorf("%s: line %d: %v", v, i+1, err)
		}
		keys = append(keys, line)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s holds no verifier key", v)
	}
	return keys, nil
}

// newerCheckpoint reads the newer checkpoint and the consistency proof
// from the receipt's tree size to it.
func newerCheckpoint(doc []byte, cpFile, proofFile, bundleFile string) (*verify.NewerCheckpoint, error) {
	r, err := verify.ParseReceipt(doc)
	if err != nil {
		return nil, err
	}
	text, _, _ := bytes.Cut(r.Checkpoint, []byte("\n\n"))
	old, err := verify.ParseCheckpointHead(append(text, '\n'))
	if err != nil {
		return nil, fmt.Errorf("the receipt's checkpoint: %v", err)
	}
	nc := &verify.NewerCheckpoint{}
	var b struct {
		Checkpoints       []string                  `json:"checkpoints"`
		ConsistencyProofs []verify.ConsistencyProof `json:"consistency_proofs"`
	}
	if bundleFile != "" {
		f, err := os.Open(bundleFile)
		if err != nil {
			return nil, fmt.Errorf("--bundle: %v", err)
		}
		defer f.Close()
		if err := json.NewDecoder(io.LimitReader(f, 1<<30)).Decode(&b); err != nil {
			return nil, fmt.Errorf("--bundle %s: %v", bundleFile, err)
		}
	}
	if cpFile != "" {
		if nc.Signed, err = os.ReadFile(cpFile); err != nil {
			return nil, fmt.Errorf("--checkpoint: %v", err)
		}
	} else if len(b.Checkpoints) > 0 {
		nc.Signed = []byte(b.Checkpoints[len(b.Checkpoints)-1])
	} else {
		return nil, fmt.Errorf("--bundle %s carries no checkpoint", bundleFile)
	}
	ntext, _, _ := bytes.Cut(nc.Signed, []byte("\n\n"))
	cur, err := verify.ParseCheckpointHead(append(ntext, '\n'))
	if err != nil {
		return nil, fmt.Errorf("the newer checkpoint: %v", err)
	}
	if cur.Size == old.Size {
		return nc, nil // same tree: no proof needed, the roots are compared
	}
	if proofFile != "" {
		pb, err := os.ReadFile(proofFile)
		if err != nil {
			return nil, fmt.Errorf("--consistency: %v", err)
		}
		var p struct {
			OldSize uint64   `json:"old_size"`
			NewSize uint64   `json:"new_size"`
			Proof   [][]byte `json:"proof"`
		}
		dec := json.NewDecoder(bytes.NewReader(pb))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("--consistency %s: %v", proofFile, err)
		}
		if p.OldSize != old.Size || p.NewSize != cur.Size {
			return nil, fmt.Errorf("--consistency %s proves %d..%d, but the receipt's tree has %d leaves and the newer checkpoint's %d", proofFile, p.OldSize, p.NewSize, old.Size, cur.Size)
		}
		nc.Consistency = p.Proof
		return nc, nil
	}
	for _, p := range b.ConsistencyProofs {
		if p.OldSize == old.Size && p.NewSize == cur.Size {
			nc.Consistency = p.Proof
			return nc, nil
		}
	}
	return nil, errors.New("--bundle " + bundleFile + fmt.Sprintf(" has no consistency proof from tree size %d to %d: export it with since_size=%d", old.Size, cur.Size, old.Size))
}

// printReceipt writes the report as text or JSON and returns the exit
// status.
func printReceipt(name string, r *verify.ReceiptReport, asJSON bool, stdout, stderr io.Writer) int {
	if asJSON {
		if !writeJSON("receipt", r, stdout, stderr) {
			return exitInput
		}
	} else {
		printFindings(stdout, name, r.Findings, r.Notices)
		printTimestamps(stdout, name, r.Timestamps)
		verdict := "verified"
		if !r.Verified {
			verdict = fmt.Sprintf("NOT verified (%d findings)", len(r.Findings))
		}
		decision := r.Decision
		if decision == "" {
			decision = "(no decision recorded)"
		}
		fmt.Fprintf(stdout, "%s: %s: session %s position %d: %s %s (step_id %s) at %s\n", name, verdict, r.SessionID, r.Position, r.StepType, decision, r.StepID, r.Timestamp)
		for _, p := range r.PolicyReferences {
			fmt.Fprintf(stdout, "\tpolicy %s version %s rule %s\n", p.PolicyID, p.PolicyVersion, p.RuleID)
		}
		fmt.Fprintf(stdout, "\tentry_hash %s, leaf %d in checkpoint %d of %s\n", r.EntryHash, r.LeafIndex, r.TreeSize, r.Origin)
		if r.NewerTreeSize != 0 {
			fmt.Fprintf(stdout, "\tnewer checkpoint: %d leaves\n", r.NewerTreeSize)
		}
	}
	if !r.Verified {
		return exitFindings
	}
	return exitVerified
}
