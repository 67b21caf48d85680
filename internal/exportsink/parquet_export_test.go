package exportsink

import (
	"context"
	"io"
)

// PutS3 uploads size bytes from r to the S3 store a parquet+s3 Config
// names, in parts of partSize bytes beyond it (0: minio-go's 16 MiB), so
// a test can make an upload fail part-way.
func PutS3(ctx context.Context, c Config, key string, r io.Reader, size int64, partSize uint64) error {
	s, err := openS3Store(c)
	if err != nil {
		return err
	}
	return s.putFrom(ctx, key, r, size, partSize)
}
