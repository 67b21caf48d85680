package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/acsledger/acsledger/verify"
)

// maxBundleBytes bounds a bundle the events check reads whole.
const maxBundleBytes = 1 << 30

// events checks a SIEM's copy of exported events against evidence bundles
// (docs/acsverify.md, "events").
func events(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("events", "--bundle BUNDLE [--bundle BUNDLE ...] [--json] [--trust KEYFILE ...] [--hmac-ikm KEY_ID=HEX ...] EVENTS.ndjson", stderr)
	asJSON := fs.Bool("json", false, "print a machine-readable JSON report")
	var bundleFiles, trustFiles, ikms multiFlag
	fs.Var(&bundleFiles, "bundle", "an evidence bundle of a session the events belong to (repeatable, one per session)")
	fs.Var(&trustFiles, "trust", "a trust file or .pub.json key file for checking the bundles (repeatable), as for acsverify bundle")
	fs.Var(&ikms, "hmac-ikm", "HMAC-SHA256 input keying material as KEY_ID=HEX (repeatable), as for acsverify bundle")
	if !parseFileArg(fs, args) {
		return exitInput
	}
	if len(bundleFiles) == 0 {
		fmt.Fprintln(stderr, "acsverify events: --bundle is required: the events are checked against the ledger's evidence")
		return exitInput
	}
	trust, err := readTrust(trustFiles)
	if err == nil {
		err = hmacKeys(trust.ResponseKeys, ikms)
	}
	if err != nil {
		fmt.Fprintf(stderr, "acsverify events: %v\n", err)
		return exitInput
	}
	var bundles [][]byte
	for _, f := range bundleFiles {
		b, err := readBounded(f)
		if err != nil {
			fmt.Fprintf(stderr, "acsverify events: --bundle %s: %v\n", f, err)
			return exitInput
		}
		bundles = append(bundles, b)
	}
	return withArg("events", fs.Arg(0), stdin, stderr, func(in io.Reader, name string) int {
		// In text form each event's line is printed as it is checked, so a
		// copy of any length needs no memory for its results.
		var each func(verify.EventResult)
		var n eventCounts
		if !*asJSON {
			out := bufio.NewWriter(stdout)
			defer out.Flush()
			stdout = out
			each = func(e verify.EventResult) {
				switch e.Status {
				case "verified":
					n.verified++
				case "outside_bundle":
					n.outside++
				}
				printEvent(stdout, name, e)
			}
		}
		r, err := verify.VerifyEventsFunc(bundles, in, trust, each)
		if err != nil {
			return inputFailed(stderr, "events", name, err)
		}
		return printEvents(name, bundleFiles, r, n, *asJSON, stdout, stderr)
	})
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxBundleBytes+1))
	if err == nil && len(b) > maxBundleBytes {
		err = fmt.Errorf("longer than %d bytes", maxBundleBytes)
	}
	return b, err
}

// eventsJSON is the --json report of acsverify events (docs/acsverify.md).
type eventsJSON struct {
	Verified   bool                 `json:"verified"`
	Events     []verify.EventResult `json:"events"`
	Findings   []verify.Finding     `json:"findings"`
	Notices    []verify.Finding     `json:"notices,omitempty"`
	Duplicates int                  `json:"duplicates"`
	Bundles    []bundleJSON         `json:"bundles"`
}

type bundleJSON struct {
	File string `json:"file"`
	verify.ReportJSON
}

func printEvent(w io.Writer, name string, e verify.EventResult) {
	what := "event"
	if e.Finding {
		what = "detection finding"
	}
	line := fmt.Sprintf("%s: line %d: %s %s of %s/%d, entry hash %s: %s", name, e.Line, e.Format, what, e.SessionID, e.Position, e.EntryHash, e.Status)
	if e.Member != "" {
		line += " at " + e.Member
	}
	fmt.Fprintln(w, line)
}

// printEvents prints the report after the events (which text form printed
// as they were checked, counting them in n) and returns the exit
// status.
// eventCounts counts the events text form printed, by status.
type eventCounts struct{ verified, outside int }

func printEvents(name string, bundleFiles []string, r *verify.EventsReport, n eventCounts, asJSON bool, stdout, stderr io.Writer) int {
	status := exitVerified
	if !r.Verified() {
		status = exitFindings
	}
	if asJSON {
		out := eventsJSON{Verified: r.Verified(), Events: r.Events, Findings: r.Findings, Notices: r.Notices, Duplicates: r.Duplicates}
		if out.Events == nil {
			out.Events = []verify.EventResult{}
		}
		if out.Findings == nil {
			out.Findings = []verify.Finding{}
		}
		for i, b := range r.Bundles {
			out.Bundles = append(out.Bundles, bundleJSON{File: bundleFiles[i], ReportJSON: b.JSON()})
		}
		if !writeJSON("events", out, stdout, stderr) {
			return exitInput
		}
		return status
	}
	for i, b := range r.Bundles {
		for _, f := range b.Findings {
			fmt.Fprintf(stdout, "%s: %s: %s: %s\n", bundleFiles[i], location(f), f.Code, f.Message)
		}
	}
	printFindings(stdout, name, r.Findings, r.Notices)
	if status == exitVerified {
		fmt.Fprintf(stdout, "%s: verified: %d events match the ledger, %d duplicates, %d outside the bundles\n", name, n.verified, r.Duplicates, n.outside)
	} else {
		nb := 0
		for _, b := range r.Bundles {
			nb += len(b.Findings)
		}
		fmt.Fprintf(stdout, "%s: NOT verified: %d events match the ledger, %d event findings, %d bundle findings\n", name, n.verified, len(r.Findings), nb)
	}
	return status
}
