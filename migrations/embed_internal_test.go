package migrations

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestLoadOrder(t *testing.T) {
	fsys := fstest.MapFS{
		"d/0010_later.sql": {Data: []byte("SELECT 10;")},
		"d/0002_b.sql":     {Data: []byte("SELECT 2;")},
		"d/0001_a.sql":     {Data: []byte("SELECT 1;")},
	}
	ms, err := load(fsys, "d")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Name+"="+m.SQL)
	}
	if want := "0001_a.sql=SELECT 1; 0002_b.sql=SELECT 2; 0010_later.sql=SELECT 10;"; strings.Join(got, " ") != want {
		t.Fatalf("got %q, want %q", strings.Join(got, " "), want)
	}
}

func TestLoadRefusesBadNames(t *testing.T) {
	for _, tc := range []struct {
		files []string
		want  string
	}{
		{[]string{"0001_a.sql", "0001_b.sql"}, "share version 1"},
		{[]string{"1_a.sql"}, "NNNN_name.sql"},
		{[]string{"0000_zero.sql"}, "NNNN_name.sql"},
		{[]string{"0001_a.txt"}, "NNNN_name.sql"},
		{[]string{"abcd_a.sql"}, "NNNN_name.sql"},
	} {
		fsys := fstest.MapFS{}
		for _, f := range tc.files {
			fsys["d/"+f] = &fstest.MapFile{Data: []byte("SELECT 1;")}
		}
		if _, err := load(fsys, "d"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.files, err, tc.want)
		}
	}
}

// The embedded sets must stay parallel: every version exists in both
// dialects, starting at 0001.
func TestEmbeddedDialectsMatch(t *testing.T) {
	pg, err := Postgres()
	if err != nil {
		t.Fatal(err)
	}
	lite, err := SQLite()
	if err != nil {
		t.Fatal(err)
	}
	if len(pg) == 0 || pg[0].Version != 1 {
		t.Fatalf("postgres migrations must start at 0001: %v", pg)
	}
	if len(pg) != len(lite) {
		t.Fatalf("%d postgres migrations, %d sqlite migrations", len(pg), len(lite))
	}
	for i := range pg {
		if pg[i].Version != lite[i].Version {
			t.Errorf("migration %d: postgres version %d, sqlite version %d", i, pg[i].Version, lite[i].Version)
		}
	}
}
