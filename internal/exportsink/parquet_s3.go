package exportsink

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// s3Store puts objects into a bucket of S3-compatible object storage with
// minio-go. An object appears only when its PUT completes: a single PUT up
// to 16 MiB, a multipart upload beyond it, which is invisible until
// completed and aborted on failure. Credentials come from the URL's
// userinfo, or else from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN; none of them is ever logged.
type s3Store struct {
	client *minio.Client
	bucket string
}

func envCredentials() bool {
	return os.Getenv("AWS_ACCESS_KEY_ID") != "" && os.Getenv("AWS_SECRET_ACCESS_KEY") != ""
}

func openS3Store(c Config) (*s3Store, error) {
	p := c.parquet
	creds := credentials.NewEnvAWS()
	if p.accessKey != "" {
		creds = credentials.NewStaticV4(p.accessKey, p.secretKey, "")
	}
	tr, err := minio.DefaultTransport(p.secure)
	if err != nil {
		return nil, err
	}
	if c.tls != nil {
		tr.TLSClientConfig = c.tls
	}
	cl, err := minio.New(p.endpoint, &minio.Options{Creds: creds, Secure: p.secure, Region: p.region, Transport: tr})
	if err != nil {
		return nil, fmt.Errorf("S3 endpoint %s: %w", p.endpoint, err)
	}
	return &s3Store{client: cl, bucket: p.bucket}, nil
}

func (s *s3Store) put(ctx context.Context, key string, data []byte) error {
	return s.putFrom(ctx, key, bytes.NewReader(data), int64(len(data)), 0)
}

// putFrom uploads size bytes from r; partSize 0 is minio-go's (16 MiB).
func (s *s3Store) putFrom(ctx context.Context, key string, r io.Reader, size int64, partSize uint64) error {
	_, err := s.client.PutObject(ctx, s.bucket, path.Clean(key), r, size,
		minio.PutObjectOptions{ContentType: "application/vnd.apache.parquet", PartSize: partSize})
	return err
}
