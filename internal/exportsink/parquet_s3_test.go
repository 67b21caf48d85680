package exportsink_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/acsledger/acsledger/internal/exportsink"
)

// The S3 tests run SeaweedFS, an S3-compatible server, built from its Go
// module by deploy/seaweedfs (build.sh). The binary is ACSLEDGER_WEED, or
// else the cache path build.sh writes, keyed by the wrapper's go.sum.

// weedBinary returns the SeaweedFS binary; without one the test fails
// under CI=true and is skipped elsewhere.
func weedBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("ACSLEDGER_WEED")
	if bin == "" {
		sum, err := os.ReadFile(filepath.Join("..", "..", "deploy", "seaweedfs", "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(sum)
		bin = filepath.Join(cache, "acsledger", "weed-"+hex.EncodeToString(h[:8]))
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("SeaweedFS (the S3-compatible server of the Parquet tests) is missing: %v; build it with deploy/seaweedfs/build.sh", err)
		}
		t.Skipf("SeaweedFS is missing (%v): build it with deploy/seaweedfs/build.sh", err)
	}
	return bin
}

// weed is a running SeaweedFS with an S3 gateway on a loopback port.
type weed struct {
	endpoint       string
	access, secret string
	client         *minio.Client
}

// startWeed starts SeaweedFS (master, volume, filer and S3 gateway on
// loopback ports, telemetry off, nothing else listening) with one
// identity, and waits until a PUT into bucket succeeds. Its ports are
// picked free just before it starts, so another process can take one
// first: a server that exits before it is ready is started again on new
// ports, five times at most.
func startWeed(t *testing.T, bucket string) *weed {
	t.Helper()
	bin := weedBinary(t)
	dir := t.TempDir()
	w := &weed{access: "acsledger-test", secret: "test-secret-" + hex.EncodeToString([]byte(t.Name()))[:16]}
	conf := fmt.Sprintf(`{"identities":[{"name":"acsledger-test","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","Write","List","Tagging"]}]}`, w.access, w.secret)
	if err := os.WriteFile(filepath.Join(dir, "s3.json"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		err := w.start(t, bin, dir, attempt, bucket)
		if err == nil {
			return w
		}
		if attempt == 5 || !errors.Is(err, errWeedExited) {
			t.Fatalf("SeaweedFS (attempt %d): %v", attempt, err)
		}
		t.Logf("SeaweedFS attempt %d: %v; again on new ports", attempt, err)
	}
}

var errWeedExited = errors.New("the server exited before it was ready")

// start runs one SeaweedFS server in dir/N and waits until it is ready.
func (w *weed) start(t *testing.T, bin, dir string, n int, bucket string) error {
	ports := freePorts(t, 8)
	w.endpoint = fmt.Sprintf("127.0.0.1:%d", ports[6])
	data := filepath.Join(dir, fmt.Sprintf("data%d", n))
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, fmt.Sprintf("weed%d.log", n)))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir="+data,
		fmt.Sprintf("-master.port=%d", ports[0]), fmt.Sprintf("-master.port.grpc=%d", ports[1]),
		"-master.telemetry=false", "-master.volumeSizeLimitMB=64",
		fmt.Sprintf("-volume.port=%d", ports[2]), fmt.Sprintf("-volume.port.grpc=%d", ports[3]), "-volume.max=8",
		"-filer", fmt.Sprintf("-filer.port=%d", ports[4]), fmt.Sprintf("-filer.port.grpc=%d", ports[5]),
		"-s3", fmt.Sprintf("-s3.port=%d", ports[6]), fmt.Sprintf("-s3.port.grpc=%d", ports[7]),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.config="+filepath.Join(dir, "s3.json"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		log.Close()
		if t.Failed() {
			if b, err := os.ReadFile(log.Name()); err == nil {
				t.Logf("%s (tail):\n%s", filepath.Base(log.Name()), tail(string(b), 3000))
			}
		}
	})
	w.client, err = minio.New(w.endpoint, &minio.Options{Creds: credentials.NewStaticV4(w.access, w.secret, ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	// Ready once the bucket exists and takes an object (the volume server
	// registers with the master a moment after the gateway listens).
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := w.client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{})
		if err != nil {
			if r := minio.ToErrorResponse(err); r.Code == "BucketAlreadyOwnedByYou" || r.Code == "BucketAlreadyExists" {
				err = nil
			}
		}
		if err == nil {
			_, err = w.client.PutObject(ctx, bucket, "probe", strings.NewReader("probe"), 5, minio.PutObjectOptions{})
		}
		if err == nil {
			err = w.client.RemoveObject(ctx, bucket, "probe", minio.RemoveObjectOptions{})
		}
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(log.Name())
			return fmt.Errorf("%w: %s", errWeedExited, tail(string(b), 400))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("its S3 gateway never took an object: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// objects downloads every object of bucket under prefix, by key less the
// prefix.
func (w *weed) objects(t *testing.T, bucket, prefix string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][]byte{}
	for o := range w.client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		obj, err := w.client.GetObject(ctx, bucket, o.Key, minio.GetObjectOptions{})
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
	w := startWeed(t, "lake")
	l, hashes, findings := lakeLedger(t, n)
	url := fmt.Sprintf("parquet+s3+http://%s:%s@%s/lake/acs/ocsf", w.access, w.secret, w.endpoint)
	runParquet(t, l, "s3lake", url)
	files := w.objects(t, "lake", "acs/ocsf/")
	checkLake(t, files, hashes, findings)
	// Nothing but finished objects: no multipart upload left open.
	for u := range w.client.ListIncompleteUploads(context.Background(), "lake", "", true) {
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
	w := startWeed(t, "lake")
	c, err := exportsink.Parse("s3lake", fmt.Sprintf("parquet+s3+http://%s:%s@%s/lake/acs", w.access, w.secret, w.endpoint), "ocsf")
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
	got := w.objects(t, "lake", "")
	if len(got) != 1 || !bytes.Equal(got[whole], data[:7*mib]) {
		keys := []string{}
		for k, v := range got {
			keys = append(keys, fmt.Sprintf("%s (%d bytes)", k, len(v)))
		}
		t.Fatalf("the bucket holds %v, want only %s whole", keys, whole)
	}
}
