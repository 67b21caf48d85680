package exportsink

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParquetDirNothingPartial: a file whose write fails is never
// visible, and what a crash left in .tmp is removed when the sink opens
// again, while finished files stay.
func TestParquetDirNothingPartial(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d, err := openDirStore(root, "lake")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := d.put(ctx, "class_uid=1007/event_day=20261201/lake-0-9.parquet", []byte("whole file")); err != nil {
		t.Fatal(err)
	}
	// A cancelled put writes nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := d.put(cctx, "class_uid=1007/event_day=20261201/lake-10-19.parquet", []byte("never")); err == nil {
		t.Fatal("a cancelled put succeeded")
	}
	// A write that fails half-way (here: the temporary file's directory
	// is gone, as on a full or failing disk) leaves nothing visible.
	if err := os.RemoveAll(d.tmp); err != nil {
		t.Fatal(err)
	}
	if err := d.put(ctx, "class_uid=1007/event_day=20261202/lake-10-19.parquet", []byte("never")); err == nil {
		t.Fatal("a put without its temporary directory succeeded")
	}
	// A crash mid-write leaves a temporary file: the next open removes it.
	d, err = openDirStore(root, "lake")
	if err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(d.tmp, "lake-0123456789abcdef.tmp")
	if err := os.WriteFile(crashed, []byte("PAR1 half a file"), 0o640); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(d.tmp, "other-0123456789abcdef.tmp")
	if err := os.WriteFile(other, []byte("another sink's, still writing"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := openDirStore(root, "lake"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(crashed); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the crashed write's temporary file is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another sink's temporary file was removed: %v", err)
	}
	var visible []string
	filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && !strings.Contains(p, "/.tmp/") {
			rel, _ := filepath.Rel(root, p)
			visible = append(visible, rel)
		}
		return err
	})
	if len(visible) != 1 || visible[0] != "class_uid=1007/event_day=20261201/lake-0-9.parquet" {
		t.Errorf("visible files %v, want only the whole one", visible)
	}
}

func TestParquetPartitionPath(t *testing.T) {
	t.Parallel()
	k := partition{class: 1007, day: "20261201"}
	for _, tc := range []struct {
		p    parquetConfig
		want string
	}{
		{parquetConfig{layout: "hive"}, "class_uid=1007/event_day=20261201"},
		{parquetConfig{layout: "hive", prefix: "acs/ocsf"}, "acs/ocsf/class_uid=1007/event_day=20261201"},
		{parquetConfig{layout: "security-lake", prefix: "ext", source: "acsledger", region: "eu-west-1", accountID: "123456789012"},
			"ext/acsledger_1007/region=eu-west-1/accountId=123456789012/eventDay=20261201"},
	} {
		if got := tc.p.partitionPath(k); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.p, got, tc.want)
		}
	}
}
