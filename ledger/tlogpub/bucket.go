package tlogpub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Errors a Bucket returns.
var (
	// ErrNotExist: the object does not exist.
	ErrNotExist = errors.New("no such object")
	// ErrExists: Create found the object already there.
	ErrExists = errors.New("object exists")
)

// Object is how an object is served: its Content-Type and Cache-Control.
type Object struct {
	ContentType  string
	CacheControl string
}

// Bucket is where the public log is written: an S3-compatible bucket
// under a prefix, or a directory.
type Bucket interface {
	// Get returns the object's bytes; ErrNotExist if there is none.
	Get(ctx context.Context, key string) ([]byte, error)
	// Put writes the object whole (readers see the old or the new bytes,
	// never a part), replacing any.
	Put(ctx context.Context, key string, data []byte, o Object) error
	// Create writes the object only if none exists (If-None-Match: *);
	// ErrExists otherwise, and nothing is changed.
	Create(ctx context.Context, key string, data []byte, o Object) error
	// String names the bucket for messages, without credentials.
	String() string
}

// Open opens the bucket of a --publish URL:
//
//	s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT&region=REGION[&credentials=FILE&profile=NAME]
//	file:///DIR
//
// An s3 URL's endpoint defaults to https://s3.amazonaws.com and its region
// to us-east-1. Its credentials come from the AWS shared credentials FILE
// (profile default, or profile=NAME), or else from AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN; the URL itself must carry
// none (it is logged). Open checks the form only; nothing is contacted.
func Open(raw string) (Bucket, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--publish: not a URL: %v", redactErr(err))
	}
	if u.User != nil {
		return nil, errors.New("--publish: the URL must not carry credentials (it is logged): use AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or ?credentials=FILE")
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" || u.Path == "" || len(u.Query()) > 0 {
			return nil, fmt.Errorf("--publish %s: want file:///DIR", u.Redacted())
		}
		return &dirBucket{dir: filepath.Clean(u.Path)}, nil
	case "s3":
		return openS3(u)
	default:
		return nil, fmt.Errorf("--publish %s: scheme must be s3 or file", u.Redacted())
	}
}

// redactErr keeps a url.Parse error from quoting the URL, which may hold
// a secret the user put there by mistake.
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func openS3(u *url.URL) (Bucket, error) {
	name := u.Host
	if name == "" {
		return nil, errors.New("--publish s3://BUCKET/PREFIX: the bucket name is missing")
	}
	q := u.Query()
	for k := range q {
		switch k {
		case "endpoint", "region", "credentials", "profile":
		default:
			return nil, fmt.Errorf("--publish: unknown parameter %q (want endpoint, region, credentials, profile)", k)
		}
	}
	endpoint, secure := "s3.amazonaws.com", true
	if e := q.Get("endpoint"); e != "" {
		eu, err := url.Parse(e)
		if err != nil || (eu.Scheme != "http" && eu.Scheme != "https") || eu.Host == "" || (eu.Path != "" && eu.Path != "/") || eu.User != nil {
			return nil, fmt.Errorf("--publish: endpoint must be http(s)://HOST[:PORT], got %q", e)
		}
		endpoint, secure = eu.Host, eu.Scheme == "https"
	}
	region := q.Get("region")
	if region == "" {
		region = "us-east-1"
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		if path.Clean(prefix) != prefix || strings.HasPrefix(prefix, "..") {
			return nil, fmt.Errorf("--publish: prefix %q is not a clean path", prefix)
		}
		prefix += "/"
	}
	var creds *credentials.Credentials
	if file := q.Get("credentials"); file != "" {
		if _, err := os.Stat(file); err != nil {
			return nil, fmt.Errorf("--publish: credentials file: %w", err)
		}
		creds = credentials.NewFileAWSCredentials(file, q.Get("profile"))
		if _, err := creds.GetWithContext(nil); err != nil {
			return nil, fmt.Errorf("--publish: credentials file %s (profile %q) holds no usable keys", file, q.Get("profile"))
		}
	} else {
		if os.Getenv("AWS_ACCESS_KEY_ID") == "" || os.Getenv("AWS_SECRET_ACCESS_KEY") == "" {
			return nil, fmt.Errorf("--publish s3://%s: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give ?credentials=FILE", name)
		}
		creds = credentials.NewEnvAWS()
	}
	cl, err := minio.New(endpoint, &minio.Options{Creds: creds, Secure: secure, Region: region})
	if err != nil {
		return nil, fmt.Errorf("--publish: S3 endpoint %s: %w", endpoint, err)
	}
	scheme := "https"
	if !secure {
		scheme = "http"
	}
	return &s3Bucket{client: cl, bucket: name, prefix: prefix, name: fmt.Sprintf("s3://%s/%s (%s://%s)", name, prefix, scheme, endpoint)}, nil
}

// s3Bucket is a bucket of S3-compatible object storage, written with
// minio-go. A single PUT is atomic: an object appears whole or not at all.
type s3Bucket struct {
	client *minio.Client
	bucket string
	prefix string
	name   string
}

func (b *s3Bucket) String() string { return b.name }

func (b *s3Bucket) Get(ctx context.Context, key string) ([]byte, error) {
	obj, err := b.client.GetObject(ctx, b.bucket, b.prefix+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, b.err(key, err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		return nil, b.err(key, err)
	}
	return data, nil
}

func (b *s3Bucket) err(key string, err error) error {
	r := minio.ToErrorResponse(err)
	if r.Code == "NoSuchKey" || r.StatusCode == http.StatusNotFound && r.Code != "NoSuchBucket" {
		return fmt.Errorf("%s%s: %w", b.prefix, key, ErrNotExist)
	}
	return fmt.Errorf("%s%s: %w", b.prefix, key, err)
}

func (b *s3Bucket) Put(ctx context.Context, key string, data []byte, o Object) error {
	_, err := b.client.PutObject(ctx, b.bucket, b.prefix+key, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: o.ContentType, CacheControl: o.CacheControl, DisableMultipart: true})
	if err != nil {
		return b.err(key, err)
	}
	return nil
}

func (b *s3Bucket) Create(ctx context.Context, key string, data []byte, o Object) error {
	opts := minio.PutObjectOptions{ContentType: o.ContentType, CacheControl: o.CacheControl, DisableMultipart: true}
	opts.SetMatchETagExcept("*")
	_, err := b.client.PutObject(ctx, b.bucket, b.prefix+key, bytes.NewReader(data), int64(len(data)), opts)
	if err != nil {
		if r := minio.ToErrorResponse(err); r.StatusCode == http.StatusPreconditionFailed || r.Code == "PreconditionFailed" {
			return fmt.Errorf("%s%s: %w", b.prefix, key, ErrExists)
		}
		return b.err(key, err)
	}
	return nil
}

// dirBucket is a directory: objects are files written to a temporary
// name, synced and renamed (Put) or hard-linked (Create, which fails if
// the name exists), so a reader never sees a part of one.
type dirBucket struct{ dir string }

func (d *dirBucket) String() string { return "file://" + d.dir }

func (d *dirBucket) Get(_ context.Context, key string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(d.dir, filepath.FromSlash(key)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", key, ErrNotExist)
	}
	return b, err
}

func (d *dirBucket) temp(key string, data []byte) (string, string, error) {
	name := filepath.Join(d.dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return "", "", err
	}
	f, err := os.CreateTemp(filepath.Dir(name), ".tmp-*")
	if err != nil {
		return "", "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o444)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", "", err
	}
	return f.Name(), name, nil
}

func (d *dirBucket) Put(_ context.Context, key string, data []byte, _ Object) error {
	tmp, name, err := d.temp(key, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(name))
}

func (d *dirBucket) Create(_ context.Context, key string, data []byte, _ Object) error {
	tmp, name, err := d.temp(key, data)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, name); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", key, ErrExists)
		}
		return err
	}
	return syncDir(filepath.Dir(name))
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
