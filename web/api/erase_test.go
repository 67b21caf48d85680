package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/guardian/replay"
	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/web/internal/webtest"
)

// TestReplayErasedRoute: replaying a step whose params were erased, with
// none supplied, is 410 Gone saying when and why; with them it replays.
func TestReplayErasedRoute(t *testing.T) {
	ctx := context.Background()
	f := evidencetest.New(t, "sqlite")
	base := evidenceServer(t, f, nil)
	deny := f.Step(t, "steps/toolCallRequest", "deny")
	e, err := replay.FindEntry(ctx, f.Store, deny.RequestID, deny.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	const reason = "data subject request #42"
	erasure, err := f.Store.EraseParams(ctx, deny.SessionID, e.Position, reason, "dpo")
	if err != nil {
		t.Fatal(err)
	}
	code, _, b := webtest.Do(t, "POST", base+"/decisions/"+deny.RequestID+"/replay", nil)
	msg := webtest.ErrorText(t, b)
	if code != 410 || !strings.Contains(msg, "erased at "+erasure.ErasedAt.Format(time.RFC3339Nano)) || !strings.Contains(msg, reason) {
		t.Errorf("replay of erased params: %d %s, want 410 saying when and why", code, b)
	}
	code, _, b = webtest.Do(t, "POST", base+"/decisions/"+deny.RequestID+"/replay", []byte(`{"params":`+string(deny.Params)+`}`))
	if code != 200 || !strings.Contains(string(b), `"params_from":"request"`) || !strings.Contains(string(b), `"same_decision":true`) {
		t.Errorf("replay of erased params with params supplied: %d %s", code, b)
	}
}
