package exportsink_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/acsledger/acsledger/internal/exportsink"
	"github.com/acsledger/acsledger/internal/s3test"
)

// The S3 tests run SeaweedFS, an S3-compatible server, through
// internal/s3test.

// objects downloads every object of bucket under prefix, by key less the
// prefix.
func objects(t *testing.T, w *s3test.Server, bucket, prefix string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][]byte{}
	for o := range w.Client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		obj, err := w.Client.GetObject(ctx, bucket, o.Key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(obj)
		obj.Close()
		if err != nil {
			t.Fatalf("%s: %v", o.Key, err)
		}
		if int64(len(data)) != o.Size {
			t.Fatalf("%s: %d bytes, listed as %d", o.Key, len(data), o.Size)
		}
		out[strings.TrimPrefix(o.Key, prefix)] = data
	}
	return out
}

// TestParquetS3 delivers 20,000 entries to SeaweedFS's S3 gateway, lists
// the bucket, downloads every object and reads it with the independent
// reader.
func TestParquetS3(t *testing.T) {
	t.Parallel()
	n := 20000
	if testing.Short() || raceDetector {
		n = 2000
	}
	w := s3test.Start(t, "lake", s3test.Options{})
	l, hashes, findings := lakeLedger(t, n)
	url := fmt.Sprintf("parquet+s3+http://%s:%s@%s/lake/acs/ocsf", w.Access, w.Secret, w.Endpoint)
	runParquet(t, l, "s3lake", url)
	files := objects(t, w, "lake", "acs/ocsf/")
	checkLake(t, files, hashes, findings)
	// Nothing but finished objects: no multipart upload left open.
	for u := range w.Client.ListIncompleteUploads(context.Background(), "lake", "", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		t.Errorf("an unfinished upload is left: %s", u.Key)
	}
}

// failAfter reads from r and fails after n bytes, as a crashed writer or a
// broken connection would end an upload.
type failAfter struct {
	r io.Reader
	n int
}

func (f *failAfter) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("injected failure mid-upload")
	}
	if len(p) > f.n {
		p = p[:f.n]
	}
	k, err := f.r.Read(p)
	f.n -= k
	return k, err
}

// TestParquetS3NothingPartial: an upload that fails part-way, as a single
// PUT or as a multipart upload after some parts, leaves no object in the
// bucket, and a whole upload beside them is there whole.
func TestParquetS3NothingPartial(t *testing.T) {
	t.Parallel()
	w := s3test.Start(t, "lake", s3test.Options{})
	c, err := exportsink.Parse("s3lake", fmt.Sprintf("parquet+s3+http://%s:%s@%s/lake/acs", w.Access, w.Secret, w.Endpoint), "ocsf")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const mib = 1 << 20
	data := bytes.Repeat([]byte("0123456789abcdef"), 24*mib/16)
	for _, tc := range []struct {
		name      string
		size, cut int
		partSize  uint64
	}{
		{"single PUT", mib, mib / 2, 0},
		{"multipart after two parts", 24 * mib, 12 * mib, 5 * mib},
	} {
		key := "class_uid=1007/event_day=20261201/" + strings.ReplaceAll(tc.name, " ", "-") + ".parquet"
		r := &failAfter{r: bytes.NewReader(data[:tc.size]), n: tc.cut}
		if err := exportsink.PutS3(ctx, c, key, r, int64(tc.size), tc.partSize); err == nil {
			t.Fatalf("%s: an upload cut at %d of %d bytes succeeded", tc.name, tc.cut, tc.size)
		}
	}
	whole := "class_uid=1007/event_day=20261201/whole.parquet"
	if err := exportsink.PutS3(ctx, c, whole, bytes.NewReader(data[:7*mib]), 7*mib, 5*mib); err != nil {
		t.Fatal(err)
	}
	got := objects(t, w, "lake", "")
	if len(got) != 1 || !bytes.Equal(got[whole], data[:7*mib]) {
		keys := []string{}
		for k, v := range got {
			keys = append(keys, fmt.Sprintf("%s (%d bytes)", k, len(v)))
		}
		t.Fatalf("the bucket holds %v, want only %s whole", keys, whole)
	}
}
