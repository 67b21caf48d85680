package stats_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acsledger/acsledger/internal/evidencetest"
	"github.com/acsledger/acsledger/web"
	"github.com/acsledger/acsledger/web/internal/webtest"
	"github.com/acsledger/acsledger/web/stats"
)

// TestChartRoutes: the log page's data and the dashboard's figures count
// what the fixture's Guardian wrote, on both stores.
func TestChartRoutes(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			f := evidencetest.New(t, kind)
			base := webtest.Serve(t, web.New(f.Store, web.Options{Evidence: web.EvidenceOptions{Log: f.Log, Bundle: f.Options(), Trust: f.Trust(t)}, Charts: f.Store, Auth: webtest.Auth(f.Store)})) + "/api/v1"

			_, _, b := webtest.Do(t, "GET", base+"/log", nil)
			var lj stats.LogJSON
			if err := json.Unmarshal(b, &lj); err != nil || len(lj.LogKeys) == 0 || !strings.HasPrefix(lj.Checkpoint, evidencetest.Origin+"\n") || len(lj.TreeSizes) == 0 {
				t.Fatalf("log: %v %s", err, b)
			}
			if last := lj.TreeSizes[len(lj.TreeSizes)-1]; !strings.Contains(lj.Checkpoint, "\n"+strconvU(last.Size)+"\n") {
				t.Errorf("newest size %d is not the checkpoint's:\n%s", last.Size, lj.Checkpoint)
			}

			_, _, b = webtest.Do(t, "GET", base+"/stats", nil)
			var st stats.StatsJSON
			if err := json.Unmarshal(b, &st); err != nil || len(st.Days) != 1 {
				t.Fatalf("stats: %v %s", err, b)
			}
			d := st.Days[0]
			if d.Day != time.Now().UTC().Format(time.DateOnly) || d.Sessions != 2 || d.Entries != 6 || d.Decisions["deny"] != 2 || d.Decisions["allow"] < 2 {
				t.Errorf("today: %+v", d)
			}
			if st.Quarantined == nil || *st.Quarantined != 0 || st.Checkpoint == nil || st.Checkpoint.Size == 0 || st.LastReverify != nil {
				t.Errorf("stats: %s", b)
			}
		})
	}
}

func strconvU(n uint64) string { return strconv.FormatUint(n, 10) }
