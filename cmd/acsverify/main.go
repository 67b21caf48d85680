// Command acsverify checks acsledger evidence offline, with no database and
// no network: it replays ContextEntry hash chains (ACS §8.2), checks signed
// chain heads and evidence bundles (docs/evidence-bundle.md), and computes
// entry_hash and request_hash values to compare against what a Guardian
// published.
//
// Usage:
//
//	acsverify entry-hash [--prev HEX] < entry.json
//	acsverify request-hash < params.json
//	acsverify chain [--json] [--responses FILE] [--session ID] [--hmac-ikm KEY_ID=HEX ...] [--keys DIR] [--require-signed-heads] FILE
//	acsverify bundle [--json] [--trust KEYFILE ...] [--hmac-ikm KEY_ID=HEX ...] [--since EARLIER] [--tsa-cert FILE] [--require-timestamp] [--require-signed-heads] FILE
//	acsverify events --bundle BUNDLE [--bundle BUNDLE ...] [--json] [--trust KEYFILE ...] EVENTS
//	acsverify receipt --log-key KEY [--trust KEYFILE ...] [--checkpoint NEWER (--consistency PROOF | --bundle B)] [--tsa-cert FILE] [--require-timestamp] [--json] FILE.tlog-proof
//
// Exit status: 0 verified, 1 verification found problems, 2 the input could
// not be read or parsed (the message names the 1-based line) or the command
// line was wrong. See docs/acsverify.md.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/acsledger/acsledger/acs"
	"github.com/acsledger/acsledger/acs/sig"
	"github.com/acsledger/acsledger/verify"
)

const (
	exitVerified = 0
	exitFindings = 1
	exitInput    = 2
)

const usage = `usage:
  acsverify entry-hash [--prev HEX] < entry.json
  acsverify request-hash < params.json
  acsverify chain [--json] [--responses FILE] [--session ID] [--hmac-ikm KEY_ID=HEX ...] [--keys DIR] [--require-signed-heads] FILE
  acsverify bundle [--json] [--trust KEYFILE ...] [--hmac-ikm KEY_ID=HEX ...] [--since EARLIER] [--tsa-cert FILE] [--require-timestamp] [--require-signed-heads] FILE
  acsverify events --bundle BUNDLE [--bundle BUNDLE ...] [--json] [--trust KEYFILE ...] [--hmac-ikm KEY_ID=HEX ...] EVENTS
  acsverify receipt ` + receiptArgs + `

entry-hash    print the entry_hash of one ContextEntry read from stdin
request-hash  print the request_hash of a request's params read from stdin
chain         replay a session's chain from JSON Lines (FILE "-" is stdin),
              and with --responses check the chain heads the Guardian signed;
              --require-signed-heads: only heads signed by a trusted
              asymmetric key count (not HMAC), as a third party needs
bundle        check an evidence bundle: chain, signed heads, checkpoints,
              witness cosignatures, inclusion and consistency proofs, policies;
              with --since, that FILE extends an earlier bundle EARLIER
events        check exported events (NDJSON: OCSF, CloudEvents, acs, or the
              pull API's {cursor, event} lines) against evidence bundles:
              each event's entry hash and content, and no entry missing
receipt       check one entry's receipt (c2sp.org/tlog-proof): checkpoint,
              witnesses, inclusion, entry, signed response, policies; with
              --checkpoint, that a newer checkpoint extends the receipt's

Exit status: 0 verified, 1 findings, 2 unreadable or malformed input.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the whole command, with its streams passed in so that tests can
// run it in-process.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitInput
	}
	cmd, args := args[0], args[1:]
	var err error
	switch cmd {
	case "entry-hash":
		err = entryHash(args, stdin, stdout, stderr)
	case "request-hash":
		err = requestHash(args, stdin, stdout, stderr)
	case "chain":
		return chain(args, stdin, stdout, stderr)
	case "bundle":
		return bundle(args, stdin, stdout, stderr)
	case "events":
		return events(args, stdin, stdout, stderr)
	case "receipt":
		return receipt(args, stdin, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitVerified
	default:
		fmt.Fprintf(stderr, "acsverify: unknown command %q\n%s", cmd, usage)
		return exitInput
	}
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "acsverify %s: %v\n", cmd, err)
		}
		return exitInput
	}
	return exitVerified
}

// newFlags returns a subcommand's flag set, reporting to stderr.
func newFlags(name, args string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: acsverify %s %s\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// readStdin reads one JSON document from stdin, bounded like a chain line.
func readStdin(stdin io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(stdin, verify.MaxLineBytes+1))
	if err != nil {
		return nil, fmt.Errorf("couldn't read stdin: %w", err)
	}
	if len(b) > verify.MaxLineBytes {
		return nil, fmt.Errorf("stdin: longer than %d bytes", verify.MaxLineBytes)
	}
	return b, nil
}

func entryHash(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("entry-hash", "[--prev HEX] < entry.json", stderr)
	prevHex := fs.String("prev", "", "previous entry's entry_hash (lowercase hex); omit for the first entry of a session")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected argument %q: the entry is read from stdin", fs.Arg(0))
	}
	var prev *acs.Hash
	if *prevHex != "" {
		h, err := acs.ParseHash(*prevHex)
		if err != nil {
			return fmt.Errorf("--prev: %w", err)
		}
		prev = &h
	}
	in, err := readStdin(stdin)
	if err != nil {
		return err
	}
	e, err := acs.ParseEntry(in)
	if err != nil {
		return fmt.Errorf("stdin: %w", err)
	}
	// The entry's own entry_hash and previous_hash members are left out of
	// the content by ParseEntry (ACS §8.2) and not used: the link is --prev.
	fmt.Fprintln(stdout, acs.EntryHash(e.Content, prev))
	return nil
}

func requestHash(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("request-hash", "< params.json", stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected argument %q: the params are read from stdin", fs.Arg(0))
	}
	in, err := readStdin(stdin)
	if err != nil {
		return err
	}
	if !isObject(in) {
		return errors.New("stdin: request params must be a JSON object")
	}
	h, err := acs.RequestHash(in)
	if err != nil {
		return fmt.Errorf("stdin: %w", err)
	}
	fmt.Fprintln(stdout, h)
	return nil
}

// isObject reports whether the first non-whitespace byte opens an object;
// RequestHash checks the rest.
func isObject(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		}
		return false
	}
	return false
}

// multiFlag collects a repeatable flag's values.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// openInput opens a named input; "-" is stdin.
func openInput(name string, stdin io.Reader) (io.Reader, string, func(), error) {
	if name == "-" {
		return stdin, "stdin", func() {}, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, name, nil, err
	}
	return f, name, func() { f.Close() }, nil
}

// parseFileArg parses args with fs, which must leave one file argument;
// flag or fs.Usage has said why when it reports false.
func parseFileArg(fs *flag.FlagSet, args []string) bool {
	if err := fs.Parse(args); err != nil {
		return false
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return false
	}
	return true
}

// withArg opens the file argument of command cmd ("-" is stdin), reporting
// progress on stderr as it is read, and returns what f returns for it.
// When it cannot open it, it says why on stderr and returns exitInput.
func withArg(cmd, arg string, stdin io.Reader, stderr io.Writer, f func(in io.Reader, name string) int) int {
	in, name, closeIn, err := openInput(arg, stdin)
	if err != nil {
		fmt.Fprintf(stderr, "acsverify %s: %v\n", cmd, err)
		return exitInput
	}
	defer closeIn()
	return f(progressReader(in, name, stderr), name)
}

// hmacKeys adds each --hmac-ikm KEY_ID=HEX to keys.
func hmacKeys(keys *sig.KeySet, flags []string) error {
	for _, v := range flags {
		k, err := sig.ParseHMACKeyFlag(v)
		if err != nil {
			return fmt.Errorf("--hmac-ikm: %w", err)
		}
		if err := keys.Add(k.Public()); err != nil {
			return fmt.Errorf("--hmac-ikm: %w", err)
		}
	}
	return nil
}

func chain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("chain", "[--json] [--responses FILE] [--session ID] [--hmac-ikm KEY_ID=HEX ...] [--keys DIR] [--require-signed-heads] FILE", stderr)
	asJSON := fs.Bool("json", false, "print a machine-readable JSON report")
	responses := fs.String("responses", "", "JSON Lines file of the signed response envelopes, as sent; checks the chain_hash each publishes")
	session := fs.String("session", "", "the session id, from which HMAC-SHA256 session keys are derived")
	keyDir := fs.String("keys", "", "directory of key files (*.pub.json, *.key.json) that verify response signatures")
	var ikms multiFlag
	fs.Var(&ikms, "hmac-ikm", "HMAC-SHA256 input keying material as KEY_ID=HEX (repeatable); without it HMAC-signed responses are reported as unverifiable_hmac")
	requireSigned := requireSignedHeadsFlag(fs)
	if !parseFileArg(fs, args) {
		return exitInput
	}
	if *responses == "-" && fs.Arg(0) == "-" {
		fmt.Fprintln(stderr, "acsverify chain: the entries and --responses cannot both be stdin")
		return exitInput
	}
	if *responses == "" && (*session != "" || *keyDir != "" || len(ikms) > 0 || *requireSigned) {
		fmt.Fprintln(stderr, "acsverify chain: --session, --keys, --hmac-ikm and --require-signed-heads need --responses")
		return exitInput
	}
	return withArg("chain", fs.Arg(0), stdin, stderr, func(in io.Reader, name string) int {
		var r *verify.Report
		var err error
		if *responses == "" {
			r, err = verify.VerifyChain(in)
			if err != nil {
				fmt.Fprintf(stderr, "acsverify chain: %s: %v\n", name, err)
				return exitInput
			}
		} else {
			keys := new(sig.KeySet)
			if *keyDir != "" {
				kd, err := sig.LoadKeyDir(*keyDir)
				if err != nil {
					fmt.Fprintf(stderr, "acsverify chain: --keys: %v\n", err)
					return exitInput
				}
				keys = kd.KeySet
			}
			if err := hmacKeys(keys, ikms); err != nil {
				fmt.Fprintf(stderr, "acsverify chain: %v\n", err)
				return exitInput
			}
			rin, rname, closeR, err := openInput(*responses, stdin)
			if err != nil {
				fmt.Fprintf(stderr, "acsverify chain: %v\n", err)
				return exitInput
			}
			defer closeR()
			hc := verify.NewHeadChecker(keys, *session)
			if *requireSigned {
				// Every key here is one the auditor gave.
				hc.RequireSignedHeads(keys)
			}
			r, err = hc.VerifyChain(in, rin)
			if err != nil {
				var ie *verify.InputError
				if errors.As(err, &ie) && ie.File == "responses" {
					ie.File = ""
					fmt.Fprintf(stderr, "acsverify chain: %s: %v\n", rname, ie)
				} else if ie != nil {
					ie.File = ""
					fmt.Fprintf(stderr, "acsverify chain: %s: %v\n", name, ie)
				} else {
					fmt.Fprintf(stderr, "acsverify chain: %v\n", err)
				}
				return exitInput
			}
		}
		return printReport("chain", name, r, *asJSON, stdout, stderr)
	})
}

func bundle(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("bundle", "[--json] [--trust KEYFILE ...] [--hmac-ikm KEY_ID=HEX ...] [--since EARLIER] [--tsa-cert FILE] [--require-timestamp] [--require-signed-heads] FILE", stderr)
	tsaCert := fs.String("tsa-cert", "", "PEM file of the RFC 3161 time-stamping authority's certificate or its CA: the checkpoints' time-stamps must chain to it (timestamp_invalid)")
	requireTS := fs.Bool("require-timestamp", false, "fail with timestamp_missing unless the bundle's largest checkpoint has a valid RFC 3161 time-stamp")
	asJSON := fs.Bool("json", false, "print a machine-readable JSON report")
	since := fs.String("since", "", "an earlier bundle of the same session that FILE must extend: same entries as a prefix, and a log proven consistent with its checkpoint (findings truncated, rewritten, log_fork)")
	var trustFiles, ikms multiFlag
	fs.Var(&trustFiles, "trust", "a trust file (the shape of a bundle's \"keys\") or a .pub.json key file (repeatable); for each kind of key none names, the bundle's own keys are used and a keys_from_bundle notice says so")
	fs.Var(&ikms, "hmac-ikm", "HMAC-SHA256 input keying material as KEY_ID=HEX (repeatable); without it HMAC-signed responses are reported as unverifiable_hmac")
	requireSigned := requireSignedHeadsFlag(fs)
	if !parseFileArg(fs, args) {
		return exitInput
	}
	trust, err := readTrust(trustFiles)
	if err == nil {
		err = hmacKeys(trust.ResponseKeys, ikms)
	}
	if err == nil {
		trust.RequireTimestamp = *requireTS
		trust.RequireSignedHeads = *requireSigned
	}
	if err == nil && *tsaCert != "" {
		var b []byte
		if b, err = os.ReadFile(*tsaCert); err == nil {
			trust.TSARoots, err = verify.ParseTSACerts(b)
		}
		if err != nil {
			err = fmt.Errorf("--tsa-cert: %w", err)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "acsverify bundle: %v\n", err)
		return exitInput
	}
	var earlier *verify.Report
	if *since != "" {
		var code int
		if earlier, code = verifyEarlier(*since, trust, stderr); earlier == nil {
			return code
		}
	}
	return withArg("bundle", fs.Arg(0), stdin, stderr, func(in io.Reader, name string) int {
		var r *verify.Report
		if earlier != nil {
			r, err = verify.VerifyBundleSince(in, trust, earlier)
		} else {
			r, err = verify.VerifyBundle(in, trust)
		}
		if err != nil {
			return inputFailed(stderr, "bundle", name, err)
		}
		return printReport("bundle", name, r, *asJSON, stdout, stderr)
	})
}

// requireSignedHeadsFlag defines --require-signed-heads on fs.
func requireSignedHeadsFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("require-signed-heads", false, "fail with head_unauthenticated unless every entry is bound by a head signed with a trusted asymmetric key (--keys, --trust); HMAC heads never count, the IKM given or not (ACS §8.6): for a third party who must know which Guardian issued the heads")
}

// verifyEarlier verifies the --since bundle. It returns its report, or nil
// and the exit status when it cannot be read or does not verify: a later
// bundle is only compared with an earlier one that holds up on its own.
func verifyEarlier(path string, trust *verify.Trust, stderr io.Writer) (*verify.Report, int) {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(stderr, "acsverify bundle: --since: %v\n", err)
		return nil, exitInput
	}
	defer f.Close()
	r, err := verify.VerifyBundle(f, trust)
	if err != nil {
		return nil, inputFailed(stderr, "bundle", "--since "+path, err)
	}
	if !r.Verified() {
		fmt.Fprintf(stderr, "acsverify bundle: --since %s does not verify (%d findings): check it on its own first\n", path, len(r.Findings))
		return nil, exitFindings
	}
	return r, exitVerified
}

// readTrust reads --trust files: trust files in the shape of a bundle's
// "keys" member, or single .pub.json key files.
func readTrust(files []string) (*verify.Trust, error) {
	t := &verify.Trust{ResponseKeys: new(sig.KeySet)}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--trust: %w", err)
		}
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(b, &probe); err != nil {
			return nil, fmt.Errorf("--trust %s: not a JSON object: %w", f, err)
		}
		if _, ok := probe["key_id"]; ok {
			k, err := sig.ParsePublicKey(b)
			if err == nil {
				err = t.ResponseKeys.Add(k)
			}
			if err != nil {
				return nil, fmt.Errorf("--trust %s: %w", f, err)
			}
			continue
		}
		var k verify.BundleKeys
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&k); err != nil {
			return nil, fmt.Errorf("--trust %s: %w", f, err)
		}
		if err := t.Merge(&k); err != nil {
			return nil, fmt.Errorf("--trust %s: %w", f, err)
		}
	}
	return t, nil
}

// printReport writes r as text or JSON and returns the exit status.
func printReport(cmd, name string, r *verify.Report, asJSON bool, stdout, stderr io.Writer) int {
	if asJSON {
		if !writeJSON(cmd, r.JSON(), stdout, stderr) {
			return exitInput
		}
	} else {
		printFindings(stdout, name, r.Findings, r.Notices)
		printTimestamps(stdout, name, r.Timestamps)
		if r.Verified() {
			fmt.Fprintf(stdout, "%s: verified: %d entries, head %s\n", name, r.Entries, r.Head)
		} else {
			plural := "s"
			if len(r.Findings) == 1 {
				plural = ""
			}
			fmt.Fprintf(stdout, "%s: NOT verified: %d entries, %d finding%s\n", name, r.Entries, len(r.Findings), plural)
		}
	}
	if !r.Verified() {
		return exitFindings
	}
	return exitVerified
}

// inputFailed reports on stderr, as cmd's, that the input name could not
// be verified (name stands in for the file an InputError names) and
// returns exitInput.
func inputFailed(stderr io.Writer, cmd, name string, err error) int {
	var ie *verify.InputError
	if errors.As(err, &ie) {
		ie.File = ""
	}
	fmt.Fprintf(stderr, "acsverify %s: %s: %v\n", cmd, name, err)
	return exitInput
}

// writeJSON writes v as indented JSON without HTML escaping; it reports
// a failed write on stderr as cmd's and returns false.
func writeJSON(cmd string, v any, stdout, stderr io.Writer) bool {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(stderr, "acsverify %s: %v\n", cmd, err)
		return false
	}
	return true
}

// printFindings writes each finding with what was expected and what was
// found, then each notice, a line each prefixed with name.
func printFindings(w io.Writer, name string, findings, notices []verify.Finding) {
	for _, f := range findings {
		fmt.Fprintf(w, "%s: %s: %s: %s\n\texpected: %s\n\tactual:   %s\n",
			name, location(f), f.Code, f.Message, orNull(f.Expected), orNull(f.Actual))
	}
	for _, f := range notices {
		fmt.Fprintf(w, "%s: %s: notice: %s: %s\n", name, location(f), f.Code, f.Message)
	}
}

// printTimestamps writes the checkpoints a trusted TSA time-stamped.
func printTimestamps(w io.Writer, name string, ts []verify.StampedCheckpoint) {
	for _, t := range ts {
		fmt.Fprintf(w, "%s: checkpoint %d time-stamped at %s\n", name, t.TreeSize, t.Time.UTC().Format(time.RFC3339))
	}
}

// location names what a finding is about in text output.
func location(f verify.Finding) string {
	if f.EntryIndex < 0 {
		if f.StepID != "" {
			return fmt.Sprintf("%s (step_id %q)", f.Where, f.StepID)
		}
		return f.Where
	}
	loc := fmt.Sprintf("entry %d (entry_id %q, step_id %q)", f.EntryIndex, f.EntryID, f.StepID)
	if f.Where != "" {
		// A finding about a response or an anchor of the entry.
		loc += " in " + f.Where
	}
	return loc
}

func orNull(s string) string {
	if s == "" {
		return "null"
	}
	return s
}
