package export_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/acsledger/acsledger/ledger"
	lexport "github.com/acsledger/acsledger/ledger/export"
	"github.com/acsledger/acsledger/ledger/export/exporttest"
	"github.com/acsledger/acsledger/web/export"
)

func serve(t *testing.T, o export.Options) string {
	t.Helper()
	r := chi.NewRouter()
	export.New(o, slog.New(slog.DiscardHandler)).Mount(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv.URL
}

type line struct {
	Cursor    string          `json:"cursor"`
	Event     json.RawMessage `json:"event"`
	Heartbeat string          `json:"heartbeat"`
}

// A follow stream sends what is there, then heartbeats carrying the
// cursor to resume from, then entries appended later.
func TestFollowHeartbeats(t *testing.T) {
	t.Parallel()
	l := exporttest.New(t)
	l.Append(t, 3)
	url := serve(t, export.Options{Store: l, Heartbeat: 50 * time.Millisecond, Poll: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/events?follow=1&format=acs", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	next := func() line {
		t.Helper()
		if !sc.Scan() {
			t.Fatalf("the stream ended: %v", sc.Err())
		}
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		return l
	}
	for i, want := range []string{"0", "1", "2"} {
		if l := next(); l.Cursor != want || l.Event == nil {
			t.Fatalf("line %d = %+v, want the event of cursor %s", i, l, want)
		}
	}
	hb := next()
	if hb.Event != nil || hb.Heartbeat == "" || hb.Cursor != "2" {
		t.Fatalf("after the end: %+v, want a heartbeat at cursor 2", hb)
	}
	if _, err := time.Parse(time.RFC3339Nano, hb.Heartbeat); err != nil {
		t.Errorf("heartbeat time %q: %v", hb.Heartbeat, err)
	}
	l.Append(t, 1)
	for {
		got := next()
		if got.Event != nil {
			if got.Cursor != "3" || !strings.Contains(string(got.Event), l.Hashes[3]) {
				t.Errorf("appended entry: %+v", got)
			}
			break
		}
	}
}

func TestEventsBadInput(t *testing.T) {
	t.Parallel()
	l := exporttest.New(t)
	url := serve(t, export.Options{Store: l})
	for _, q := range []string{"after=abc", "after=1.99", "format=ocsf2", "limit=-1", "limit=20000", "follow=perhaps"} {
		resp, err := http.Get(url + "/events?" + q)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		name, _, _ := strings.Cut(q, "=")
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), name) {
			t.Errorf("?%s: %d %s, want 400 naming %s", q, resp.StatusCode, b, name)
		}
	}
	none := serve(t, export.Options{})
	resp, err := http.Get(none + "/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("without a store: %d, want 501", resp.StatusCode)
	}
}

// GET /exports lists configured sinks first, then stored cursors of names
// no sink has now.
func TestExportsList(t *testing.T) {
	t.Parallel()
	l := exporttest.New(t)
	l.Append(t, 5)
	if err := l.PutExportCursor(context.Background(), ledger.ExportCursor{Name: "old", Next: 2, SentTo: 4, SentUnconfirmed: 4, Resent: 1, UpdatedAt: time.Now()}, 0); err != nil {
		t.Fatal(err)
	}
	url := serve(t, export.Options{Store: l, Sinks: func() []lexport.Status {
		return []lexport.Status{{Name: "siem", Delivery: "acknowledged", NextLeaf: 5, SentTo: 5, LogSize: 5, Acknowledged: 5}}
	}})
	resp, err := http.Get(url + "/exports")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Sinks []struct {
			Name          string `json:"name"`
			Cursor        string `json:"cursor"`
			EntriesBehind uint64 `json:"entries_behind"`
			ResendWindow  uint64 `json:"resend_window"`
			Acknowledged  int64  `json:"acknowledged"`
			Unconfirmed   int64  `json:"sent_unconfirmed"`
			Resent        int64  `json:"resent"`
			Configured    bool   `json:"configured"`
		} `json:"sinks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	// "old" was a plain syslog sink: 4 entries sent, never confirmed,
	// the re-send window from leaf 2.
	if len(got.Sinks) != 2 || got.Sinks[0].Name != "siem" || !got.Sinks[0].Configured || got.Sinks[0].Acknowledged != 5 ||
		got.Sinks[1].Name != "old" || got.Sinks[1].Configured || got.Sinks[1].EntriesBehind != 1 || got.Sinks[1].Cursor != "1" ||
		got.Sinks[1].ResendWindow != 2 || got.Sinks[1].Acknowledged != 0 || got.Sinks[1].Unconfirmed != 4 || got.Sinks[1].Resent != 1 {
		t.Errorf("exports = %+v", got)
	}
}
