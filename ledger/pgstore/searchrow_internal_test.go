package pgstore

import "testing"

// TestProjectSearchLeavesToTrigger: the entries whose search row the
// store does not read itself, and two it does (TestSearchProjection holds
// what it reads to the database's definition).
func TestProjectSearchLeavesToTrigger(t *testing.T) {
	for _, tc := range []struct {
		content string
		ok      bool
	}{
		{`{"decision":{"disposition":"deny","reason_codes":["a"]},"entry_id":"e"}`, true},
		{`{"decision":"allow","flags":["x"],"source":"bash-guard"}`, true},
		{`{"decision":{"disposition":5}}`, false},
		{`{"decision":{"decision":{"x":1},"disposition":null}}`, false},
		{`{"decision":{"policy_references":[{"policy_id":"p","policy_version":2}]}}`, false},
		{`{"decision":"allow","note":"a\u0000b"}`, false},
	} {
		if _, ok := projectSearch([]byte(tc.content)); ok != tc.ok {
			t.Errorf("%s: ok %v, want %v", tc.content, ok, tc.ok)
		}
	}
	row, ok := projectSearch([]byte(`{"decision":{"decision":"modify","disposition":null,"policy_references":[{"policy_id":"b"},{"policy_id":"a","policy_version":"1"}],"reason_codes":["r\"1",2],"reasoning":"why"},"flags":"no","source_format":"opa"}`))
	if !ok || row.disposition != "modify" || len(row.reasonCodes) != 1 || row.reasonCodes[0] != `r"1` ||
		len(row.policyRefs) != 4 || row.policyRefs[0] != "a" || row.policyRefs[1] != "a@1" || row.policyRefs[3] != "b@" ||
		row.source != "opa" || row.reasoning != "why" || len(row.flags) != 0 {
		t.Errorf("projected %+v, %v", row, ok)
	}
}
