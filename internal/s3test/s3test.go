// Package s3test runs SeaweedFS, a real S3-compatible object store, on
// loopback ports for tests: the Parquet sink's and the public log
// publisher's. The binary is built from its Go module by
// deploy/seaweedfs/build.sh; it is ACSLEDGER_WEED, or else the cache path
// build.sh writes, keyed by the wrapper's go.sum. Without it a test fails
// under CI=true and is skipped elsewhere.
package s3test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Binary returns the SeaweedFS binary; without one the test fails under
// CI=true and is skipped elsewhere.
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("ACSLEDGER_WEED")
	if bin == "" {
		root, err := moduleRoot()
		if err != nil {
			t.Fatal(err)
		}
		sum, err := os.ReadFile(filepath.Join(root, "deploy", "seaweedfs", "go.sum"))
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
			t.Fatalf("SeaweedFS (the tests' S3-compatible server) is missing: %v; build it with deploy/seaweedfs/build.sh", err)
		}
		t.Skipf("SeaweedFS is missing (%v): build it with deploy/seaweedfs/build.sh", err)
	}
	return bin
}

// moduleRoot is the nearest directory above the working directory that
// holds a go.mod with deploy/seaweedfs beside it.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "deploy", "seaweedfs", "go.sum")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no deploy/seaweedfs above the working directory")
		}
		dir = up
	}
}

// Options configure a server.
type Options struct {
	// PublicRead lets anonymous clients read (GET, HEAD) every bucket, as a
	// bucket behind a CDN is read.
	PublicRead bool
}

// Server is a running SeaweedFS with an S3 gateway on a loopback port and
// one identity with every right.
type Server struct {
	Endpoint       string // HOST:PORT of the S3 gateway
	Access, Secret string
	Client         *minio.Client

	t       testing.TB
	bin     string
	dir     string
	ports   []int
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	logFile *os.File
}

// Start starts SeaweedFS (master, volume, filer and S3 gateway on loopback
// ports, telemetry off, nothing else listening) and waits until a PUT
// into bucket succeeds. It is stopped when the test ends. Its ports are
// picked free just before it starts, so another process can take one
// first: a server that exits before it is ready is started again on new
// ports, five times at most.
func Start(t testing.TB, bucket string, opt Options) *Server {
	t.Helper()
	s := &Server{t: t, bin: Binary(t), dir: t.TempDir()}
	s.Access = "acsledger-test"
	s.Secret = "test-secret-" + hex.EncodeToString([]byte(t.Name()))[:16]
	conf := fmt.Sprintf(`{"identities":[{"name":"acsledger-test","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","Write","List","Tagging"]}`, s.Access, s.Secret)
	if opt.PublicRead {
		conf += `,{"name":"anonymous","actions":["Read"]}`
	}
	conf += "]}"
	if err := os.WriteFile(filepath.Join(s.dir, "s3.json"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(s.dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(s.dir, "weed.log")); err == nil {
				t.Logf("weed log (tail):\n%s", Tail(string(b), 3000))
			}
		}
	})
	for attempt := 1; ; attempt++ {
		s.ports = FreePorts(t, 8)
		s.Endpoint = fmt.Sprintf("127.0.0.1:%d", s.ports[6])
		var err error
		s.Client, err = minio.New(s.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s.Access, s.Secret, ""), Region: "us-east-1"})
		if err != nil {
			t.Fatal(err)
		}
		s.start()
		err = s.waitBucket(bucket)
		if err == nil {
			return s
		}
		s.Stop()
		if attempt == 5 || !errors.Is(err, errExited) {
			t.Fatalf("SeaweedFS (attempt %d): %v", attempt, err)
		}
		t.Logf("SeaweedFS attempt %d: %v; again on new ports", attempt, err)
	}
}

// errExited is waitBucket's error when the server stopped before it was
// ready (most often: another process took one of its ports first).
var errExited = errors.New("the server exited before it was ready")

// start runs the server process over the data directory.
func (s *Server) start() {
	s.t.Helper()
	lf, err := os.OpenFile(filepath.Join(s.dir, "weed.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	p := s.ports
	cmd := exec.Command(s.bin, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir="+filepath.Join(s.dir, "data"),
		fmt.Sprintf("-master.port=%d", p[0]), fmt.Sprintf("-master.port.grpc=%d", p[1]),
		"-master.telemetry=false", "-master.volumeSizeLimitMB=64",
		fmt.Sprintf("-volume.port=%d", p[2]), fmt.Sprintf("-volume.port.grpc=%d", p[3]), "-volume.max=8",
		"-filer", fmt.Sprintf("-filer.port=%d", p[4]), fmt.Sprintf("-filer.port.grpc=%d", p[5]),
		"-s3", fmt.Sprintf("-s3.port=%d", p[6]), fmt.Sprintf("-s3.port.grpc=%d", p[7]),
		"-s3.port.iceberg=0", "-s3.port.lance=0", "-s3.config="+filepath.Join(s.dir, "s3.json"))
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		s.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.cmd, s.logFile, s.exited = cmd, lf, exited
}

// Stop kills the server (its data stays for Restart).
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.exited
	s.logFile.Close()
	s.cmd = nil
}

// Restart starts the server again on the same ports and data after Stop,
// and waits until bucket takes an object.
func (s *Server) Restart(bucket string) {
	s.t.Helper()
	s.start()
	if err := s.waitBucket(bucket); err != nil {
		s.t.Fatal(err)
	}
}

// waitBucket waits until bucket exists and takes an object (the volume
// server registers with the master a moment after the gateway listens).
func (s *Server) waitBucket(bucket string) error {
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := s.Client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{})
		if err != nil {
			if r := minio.ToErrorResponse(err); r.Code == "BucketAlreadyOwnedByYou" || r.Code == "BucketAlreadyExists" {
				err = nil
			}
		}
		if err == nil {
			_, err = s.Client.PutObject(ctx, bucket, "s3test-probe", strings.NewReader("probe"), 5, minio.PutObjectOptions{})
		}
		if err == nil {
			err = s.Client.RemoveObject(ctx, bucket, "s3test-probe", minio.RemoveObjectOptions{})
		}
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			b, _ := os.ReadFile(filepath.Join(s.dir, "weed.log"))
			return fmt.Errorf("%w: %s", errExited, Tail(string(b), 400))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("SeaweedFS's S3 gateway never took an object: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Tail is the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// FreePorts returns n loopback ports that were free a moment ago.
func FreePorts(t testing.TB, n int) []int {
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
