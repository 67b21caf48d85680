package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/guardian/replay"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/ledger/evidence"
	"github.com/acsledger/acsledger/verify"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/api"
	"github.com/acsledger/acsledger/web/internal/webtest"
)

// testAuth accepts webtest.AdminToken as an admin. The evidence tests count
// sessions, so the access log's own sessions are left out.
func testAuth() web.AuthOptions {
	return web.AuthOptions{Bootstrap: webtest.AdminToken, NoAccessLog: true}
}

// evidenceServer serves the API over a fixture's store on a loopback port.
func evidenceServer(t *testing.T, f *evidencetest.Fixture, edit func(*web.EvidenceOptions)) string {
	t.Helper()
	opts := web.EvidenceOptions{Log: f.Log, Bundle: f.Options(), Trust: f.Trust(t)}
	if edit != nil {
		edit(&opts)
	}
	return webtest.Serve(t, web.New(f.Store, web.Options{Evidence: opts, Auth: testAuth()})) + "/api/v1"
}

func decodeReport(t *testing.T, b []byte) evidence.Report {
	t.Helper()
	var rep evidence.Report
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("report: %v\n%s", err, b)
	}
	return rep
}

func TestBundleRoute(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base := evidenceServer(t, f, nil)

	code, h, b := webtest.Do(t, "GET", base+"/sessions/"+f.HMACSession+"/bundle", nil)
	if code != 200 || h.Get("Content-Type") != "application/json" || !strings.Contains(h.Get("Content-Disposition"), "evidence-"+f.HMACSession+".json") {
		t.Fatalf("bundle: %d %v\n%s", code, h, b)
	}
	rep, err := verify.VerifyBundle(bytes.NewReader(b), f.Trust(t))
	if err != nil || !rep.Verified() || rep.Entries != 4 {
		t.Fatalf("downloaded bundle: %v %+v", err, rep)
	}
	if bytes.Contains(b, []byte(`"content"`)) {
		t.Error("policy content without include_policies")
	}
	code, _, b = webtest.Do(t, "GET", base+"/sessions/"+f.HMACSession+"/bundle?include_policies=true", nil)
	if code != 200 || !bytes.Contains(b, []byte(`"content":"`)) {
		t.Errorf("include_policies=true: %d, content present %v", code, bytes.Contains(b, []byte(`"content"`)))
	}
	for _, c := range []struct {
		path string
		code int
		msg  string
	}{
		{"/sessions/no-such-session/bundle", 404, "no-such-session"},
		{"/sessions/" + f.HMACSession + "/bundle?include_policies=maybe", 400, "include_policies"},
	} {
		code, _, b := webtest.Do(t, "GET", base+c.path, nil)
		if code != c.code || !strings.Contains(webtest.ErrorText(t, b), c.msg) {
			t.Errorf("GET %s: %d %s", c.path, code, b)
		}
	}
}

// TestBundleSinceSize: with since_size, the bundle route carries the
// checkpoint of an earlier bundle's size and the proof that the log
// extends it, so that the later bundle verifies against the earlier one
// (acsverify bundle --since); a size the log never signed is 404 before
// any byte of the bundle, a malformed one 400.
func TestBundleSinceSize(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base := evidenceServer(t, f, nil)
	path := base + "/sessions/" + f.HMACSession + "/bundle"
	code, _, earlier := webtest.Do(t, "GET", path, nil)
	before, err := verify.VerifyBundle(bytes.NewReader(earlier), f.Trust(t))
	if code != 200 || err != nil || !before.Verified() {
		t.Fatalf("earlier bundle: %d %v %+v", code, err, before)
	}
	cp, head := f.Checkpoint(t)
	f.Call(t, f.HMACSession, "steps/toolCallRequest", map[string]any{"tool": map[string]any{"name": "read_file"}, "arguments": map[string]any{}})
	f.Integrate(t)

	code, _, later := webtest.Do(t, "GET", fmt.Sprintf("%s?since_size=%d", path, head.Size), nil)
	var b struct {
		Checkpoints []string          `json:"checkpoints"`
		Consistency []json.RawMessage `json:"consistency_proofs"`
	}
	if err := json.Unmarshal(later, &b); code != 200 || err != nil || len(b.Checkpoints) != 2 || !strings.HasPrefix(b.Checkpoints[0], string(cp[:len(cp)-1])) || len(b.Consistency) != 1 {
		t.Fatalf("since_size=%d: %d %v, %d checkpoints (the first should be the earlier one), %d consistency proofs", head.Size, code, err, len(b.Checkpoints), len(b.Consistency))
	}
	rep, err := verify.VerifyBundleSince(bytes.NewReader(later), f.Trust(t), before)
	if err != nil || !rep.Verified() || rep.Entries != before.Entries+1 {
		t.Fatalf("the later bundle against the earlier one: %v %+v", err, rep)
	}
	// Without since_size the later bundle cannot show it extends the
	// earlier one's log.
	_, _, plain := webtest.Do(t, "GET", path, nil)
	if rep, err := verify.VerifyBundleSince(bytes.NewReader(plain), f.Trust(t), before); err != nil || rep.Verified() {
		t.Errorf("a later bundle without since_size verified against the earlier one: %v %+v", err, rep)
	}

	for _, c := range []struct {
		query string
		code  int
		msg   string
	}{
		{"since_size=abc", 400, "since_size"},
		{"since_size=0", 400, "since_size"},
		{"since_size=-3", 400, "since_size"},
		{fmt.Sprintf("since_size=%d", head.Size+1000), 404, fmt.Sprintf("no checkpoint at tree size %d", head.Size+1000)},
	} {
		code, h, b := webtest.Do(t, "GET", path+"?"+c.query, nil)
		if code != c.code || !strings.Contains(webtest.ErrorText(t, b), c.msg) || h.Get("Content-Disposition") != "" {
			t.Errorf("%s: %d %v %s, want %d naming %q", c.query, code, h.Get("Content-Disposition"), b, c.code, c.msg)
		}
	}
	noLog := evidenceServer(t, f, func(o *web.EvidenceOptions) { o.Log = nil })
	if code, _, b := webtest.Do(t, "GET", noLog+"/sessions/"+f.HMACSession+"/bundle?since_size=1", nil); code != 400 || !strings.Contains(webtest.ErrorText(t, b), "Merkle log") {
		t.Errorf("since_size without a log: %d %s, want 400", code, b)
	}
}

func TestVerifySessionRoute(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base := evidenceServer(t, f, nil)
	sess, _ := f.Store.Session(context.Background(), f.ECDSASession)
	code, _, b := webtest.Do(t, "GET", base+"/sessions/"+f.ECDSASession+"/verify", nil)
	rep := decodeReport(t, b)
	if code != 200 || !rep.Verified || rep.Entries != 2 || rep.Head != sess.Head.String() || len(rep.Findings) != 0 || !bytes.Contains(b, []byte(`"findings":[]`)) {
		t.Fatalf("verify: %d %s", code, b)
	}
	// Without the log, the same session is not anchored.
	unanchored := evidenceServer(t, f, func(o *web.EvidenceOptions) { o.Log = nil })
	_, _, b = webtest.Do(t, "GET", unanchored+"/sessions/"+f.ECDSASession+"/verify", nil)
	if rep := decodeReport(t, b); rep.Verified || len(rep.Findings) != 1 || rep.Findings[0].Code != verify.CodeNotAnchored || rep.Findings[0].EntryIndex != 0 {
		t.Errorf("without a log: %s", b)
	}
	if code, _, b := webtest.Do(t, "GET", base+"/sessions/nope/verify", nil); code != 404 {
		t.Errorf("unknown session: %d %s", code, b)
	}
}

func TestVerifyBundleRoute(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base := evidenceServer(t, f, func(o *web.EvidenceOptions) { o.MaxBundleBytes = 1 << 20 })
	var buf bytes.Buffer
	if _, err := evidence.Build(context.Background(), f.Store, f.Log, f.HMACSession, &buf, f.Options()); err != nil {
		t.Fatal(err)
	}
	bundle := buf.Bytes()

	code, _, b := webtest.Do(t, "POST", base+"/verify/bundle", bundle)
	if rep := decodeReport(t, b); code != 200 || !rep.Verified || rep.Entries != 4 {
		t.Fatalf("upload: %d %s", code, b)
	}
	tampered := bytes.Replace(bundle, []byte(`"disposition":"deny"`), []byte(`"disposition":"allow"`), 1)
	code, _, b = webtest.Do(t, "POST", base+"/verify/bundle", tampered)
	if rep := decodeReport(t, b); code != 200 || rep.Verified || rep.Findings[0].Code != verify.CodeEntryHashMismatch || rep.Findings[0].EntryIndex != 1 {
		t.Errorf("tampered upload: %d %s", code, b)
	}
	outOfOrder := bytes.Replace(bundle, []byte(`"format":"acsledger-evidence-bundle","version":1,`), []byte(`"version":1,"format":"acsledger-evidence-bundle",`), 1)
	for _, c := range []struct {
		name string
		body []byte
		code int
		msg  string
	}{
		{"truncated", bundle[:len(bundle)/2], 400, "malformed evidence bundle"},
		{"not JSON", []byte("hello"), 400, "malformed evidence bundle"},
		{"empty", nil, 400, "malformed evidence bundle"},
		{"members out of order", outOfOrder, 400, "format"},
		{"too large", bytes.Repeat([]byte(" "), 1<<20+1), 413, "larger than 1048576 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, b := webtest.Do(t, "POST", base+"/verify/bundle", c.body)
			if code != c.code || !strings.Contains(webtest.ErrorText(t, b), c.msg) {
				t.Errorf("%d %s, want %d naming %q", code, b, c.code, c.msg)
			}
		})
	}
}

func TestReverifyRoutes(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base := evidenceServer(t, f, nil)
	auth := []string{"Authorization", "Bearer " + webtest.AdminToken}

	if code, _, b := webtest.Do(t, "POST", base+"/admin/reverify", nil, "Authorization", ""); code != 401 || !strings.Contains(webtest.ErrorText(t, b), "needs a credential") {
		t.Errorf("no token: %d %s", code, b)
	}
	if code, h, b := webtest.Do(t, "GET", base+"/admin/reverify", nil, "Authorization", "Bearer wrong"); code != 401 || h.Get("WWW-Authenticate") == "" {
		t.Errorf("wrong token: %d %s", code, b)
	}
	code, _, b := webtest.Do(t, "GET", base+"/admin/reverify", nil, auth...)
	if code != 200 || string(bytes.TrimSpace(b)) != `{"current":null,"last":null}` {
		t.Errorf("before any run: %d %s", code, b)
	}
	if code, _, b := webtest.Do(t, "POST", base+"/admin/reverify", nil, auth...); code != 202 || !bytes.Contains(b, []byte(`"running":true`)) {
		t.Fatalf("start: %d %s", code, b)
	}
	var st api.ReverifyJSON
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, _, b = webtest.Do(t, "GET", base+"/admin/reverify", nil, auth...)
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		if st.Last != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not finish: %s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st.Last.Sessions != 2 || st.Last.Entries != 6 || st.Last.Failed != 0 || st.Last.Error != "" || st.Last.Finished.IsZero() {
		t.Errorf("last run: %s", b)
	}
}

func TestReplayRoute(t *testing.T) {
	f := evidencetest.New(t, "sqlite")
	base := evidenceServer(t, f, nil)
	deny := f.Step(t, "steps/toolCallRequest", "deny")
	allow := f.Step(t, "steps/toolCallRequest", "allow")
	body := func(members string) []byte { return []byte(`{"params":` + string(deny.Params) + members + `}`) }

	code, _, b := webtest.Do(t, "POST", base+"/decisions/"+deny.RequestID+"/replay", body(""))
	var res replay.Result
	if err := json.Unmarshal(b, &res); err != nil || code != 200 || !res.Same || res.Replayed.Disposition != "deny" || res.SessionID != deny.SessionID || !bytes.Contains(b, []byte(`"same_decision":true`)) {
		t.Fatalf("replay: %d %s", code, b)
	}
	// With no body the recorded request is replayed from the ledger alone.
	code, _, b = webtest.Do(t, "POST", base+"/decisions/"+deny.RequestID+"/replay", nil)
	res = replay.Result{}
	if err := json.Unmarshal(b, &res); err != nil || code != 200 || !res.Same || res.Replayed.Disposition != "deny" || !bytes.Contains(b, []byte(`"params_from":"ledger"`)) {
		t.Fatalf("replay with no body: %d %s", code, b)
	}
	for _, c := range []struct {
		name string
		id   string
		body []byte
		code int
		msg  string
	}{
		{"other params", deny.RequestID, []byte(`{"params":` + string(allow.Params) + `}`), 422, "request_hash"},
		{"unknown member", deny.RequestID, body(`,"polcy_version":"x"`), 400, "polcy_version"},
		{"duplicate member", deny.RequestID, body(`,"session_id":"a","session_id":"b"`), 400, "duplicate"},
		{"params not an object", deny.RequestID, []byte(`{"params":[1]}`), 400, "params must be a JSON object"},
		{"trailing data", deny.RequestID, append(body(""), []byte(` {}`)...), 400, "not one well-formed JSON object"},
		{"unknown request", "no-such-request", body(""), 404, "no-such-request"},
		{"unknown version", deny.RequestID, body(`,"policy_version":"9.9.9"`), 404, "9.9.9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, b := webtest.Do(t, "POST", base+"/decisions/"+c.id+"/replay", c.body)
			if code != c.code || !strings.Contains(webtest.ErrorText(t, b), c.msg) {
				t.Errorf("%d %s, want %d naming %q", code, b, c.code, c.msg)
			}
		})
	}
}
