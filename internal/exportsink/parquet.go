package exportsink

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"golang.org/x/sync/errgroup"

	"github.com/acsledger/acsledger/acs/trace"
	"github.com/acsledger/acsledger/ledger"
	"github.com/acsledger/acsledger/ledger/export"
)

// The Parquet sink writes OCSF events as Parquet files for security lakes
// (docs/export.md, "Parquet for security lakes"): one file per event class
// and event day of each batch, under a Hive-style partition path, to a
// directory (parquet:///DIR) or to S3-compatible object storage
// (parquet+s3://HOST[:PORT]/BUCKET[/PREFIX], HTTPS; parquet+s3+http://
// for a plain-HTTP endpoint on a loopback address). A file becomes visible only whole: written
// under a temporary name, fsynced and renamed in a directory; a completed
// PUT (or multipart upload) in S3.

// Parquet sink defaults: a batch of 10,000 entries (the most one page of
// the store's ExportEntries returns, so the most a Deliverer can send at
// once) makes files of a few MiB, ten times the other sinks' batch: a lake
// reads few big files faster than many small ones. A sink that caught up
// looks for new entries once a minute, so a trickle of entries makes at
// most one file per class and day a minute.
const (
	parquetBatch    = 10000
	parquetMaxBatch = ledger.MaxExportPage
	parquetInterval = time.Minute
	// parquetParallel is how many files of a batch are encoded and put
	// at once.
	parquetParallel = 4
)

// parquetConfig is what a Parquet sink's URL says.
type parquetConfig struct {
	// dir is the root directory (parquet:///DIR).
	dir string
	// S3: endpoint HOST[:PORT], secure (HTTPS), bucket and prefix (no
	// leading or trailing '/'), region, and the credentials, from the
	// URL's userinfo or else the environment.
	endpoint, bucket, prefix, region string
	secure                           bool
	accessKey, secretKey             string
	// layout is "hive" (PREFIX/class_uid=N/event_day=YYYYMMDD/) or
	// "security-lake" (PREFIX/SOURCE_N/region=R/accountId=A/eventDay=YYYYMMDD/).
	layout, source, accountID string
	batch                     int
	interval                  time.Duration
}

// parquetParams are the query parameters a Parquet sink takes, beside
// allow_tools and allow_args.
var parquetParams = []string{"batch", "interval", "layout", "region", "account_id", "source", "ca", "server_name"}

// parseParquet checks a parquet, parquet+s3 or parquet+s3+http URL.
func (c *Config) parseParquet(u *url.URL, q url.Values) error {
	if !c.Format.IsOCSF() {
		return fmt.Errorf("a Parquet sink writes OCSF only (ocsf or ocsf@1.5: its partitions are OCSF classes), not %s", c.Format)
	}
	p := &parquetConfig{batch: parquetBatch, interval: parquetInterval, layout: "hive", region: q.Get("region")}
	c.parquet = p
	if v := q.Get("batch"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > parquetMaxBatch {
			return fmt.Errorf("batch=%q: want a number of entries from 1 to %d", v, parquetMaxBatch)
		}
		p.batch = n
	}
	if v := q.Get("interval"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Millisecond || d > 24*time.Hour {
			return fmt.Errorf("interval=%q: want a duration from 10ms to 24h (e.g. 1m)", v)
		}
		p.interval = d
	}
	switch v := q.Get("layout"); v {
	case "", "hive":
		if q.Get("account_id") != "" || q.Get("source") != "" {
			return fmt.Errorf("account_id and source go with layout=security-lake")
		}
	case "security-lake":
		p.layout = v
		p.accountID, p.source = q.Get("account_id"), cmp.Or(q.Get("source"), "acsledger")
		if p.region == "" || p.accountID == "" {
			return fmt.Errorf("layout=security-lake needs region and account_id (the lake's partitions)")
		}
		for _, s := range []string{p.region, p.accountID, p.source} {
			if !partValue(s) {
				return fmt.Errorf("layout=security-lake: %q: want letters, digits, '.', '_' or '-'", s)
			}
		}
	default:
		return fmt.Errorf("layout=%q: want hive or security-lake", v)
	}
	switch c.Kind {
	case "parquet":
		if u.Host != "" && u.Host != "localhost" || u.Path == "" || !path.IsAbs(u.Path) || u.User != nil {
			return fmt.Errorf("want parquet:///ABSOLUTE/DIR")
		}
		if q.Get("region") != "" && p.layout == "hive" {
			return fmt.Errorf("region goes with parquet+s3 or layout=security-lake")
		}
		p.dir = path.Clean(u.Path)
		if q.Get("ca") != "" || q.Get("server_name") != "" {
			return fmt.Errorf("ca and server_name go with parquet+s3")
		}
		return nil
	}
	// parquet+s3, parquet+s3+http
	p.secure = c.Kind == "parquet+s3"
	if u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("want %s://HOST[:PORT]/BUCKET[/PREFIX]", c.Kind)
	}
	if _, port, err := net.SplitHostPort(u.Host); err == nil {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q: want 1 to 65535", port)
		}
	}
	if !p.secure && !isLoopback(u.Hostname()) {
		return fmt.Errorf("parquet+s3+http sends the evidence in clear and is taken only to a loopback address (use parquet+s3)")
	}
	p.endpoint = u.Host
	bucket, prefix, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if bucket == "" {
		return fmt.Errorf("want %s://HOST[:PORT]/BUCKET[/PREFIX]: no bucket", c.Kind)
	}
	p.bucket, p.prefix = bucket, strings.Trim(prefix, "/")
	p.region = cmp.Or(p.region, "us-east-1")
	if u.User != nil {
		p.accessKey = u.User.Username()
		p.secretKey, _ = u.User.Password()
		if p.accessKey == "" || p.secretKey == "" {
			return fmt.Errorf("userinfo: want ACCESS_KEY:SECRET_KEY@ (or neither, and AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY set)")
		}
	} else if !envCredentials() {
		return fmt.Errorf("no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or give ACCESS_KEY:SECRET_KEY@ in the URL)")
	}
	if p.secure {
		tc, err := tlsConfig(u, q)
		if err != nil {
			return err
		}
		c.tls = tc
	} else if q.Get("ca") != "" || q.Get("server_name") != "" {
		return fmt.Errorf("ca and server_name need parquet+s3 (HTTPS)")
	}
	return nil
}

func partValue(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return s != ""
}

// objectStore is where a Parquet sink's files go.
type objectStore interface {
	// put makes the object at key (a '/'-separated path under the
	// sink's root) hold data, whole, or leaves it as it was: nothing
	// partial is ever visible. It returns once the object is durable.
	put(ctx context.Context, key string, data []byte) error
}

// parquetSink groups a batch by class and event day and puts one file per
// group.
type parquetSink struct {
	c     Config
	p     *parquetConfig
	store objectStore
	opts  []parquet.WriterOption
}

func newParquet(c Config) (*parquetSink, error) {
	version := trace.OCSFVersion
	if c.Format == trace.OCSF15 {
		version = trace.OCSF15Version
	}
	s := &parquetSink{c: c, p: c.parquet, opts: []parquet.WriterOption{
		// ZSTD at its fastest level: at the default level it took
		// 45% of the sink's CPU for files no smaller (322 against
		// 321 bytes an event in BenchmarkParquetDelivery).
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedFastest}),
		parquet.CreatedBy("acsledger", "", ""),
		parquet.KeyValueMetadata("ocsf_version", version),
	}}
	var err error
	if s.p.dir != "" {
		s.store, err = openDirStore(s.p.dir, c.Name)
	} else {
		s.store, err = openS3Store(c)
	}
	if err != nil {
		return nil, fmt.Errorf("export sink %s: %w", c.Name, err)
	}
	return s, nil
}

// BatchSize is the most entries the sink takes in one Send: serve sets
// the sink's Deliverer.Batch to it.
func (s *parquetSink) BatchSize() int { return s.p.batch }

// PollInterval is how often the sink, once caught up, looks for new
// entries: serve sets the sink's Deliverer.Poll to it.
func (s *parquetSink) PollInterval() time.Duration { return s.p.interval }

// partition is one file's class and event day (UTC, YYYYMMDD).
type partition struct {
	class int32
	day   string
}

func (s *parquetSink) Send(ctx context.Context, batch []export.Event) error {
	if len(batch) == 0 {
		return nil
	}
	type timed struct {
		ms int64
		ev *export.Event
	}
	byPart := map[partition][]timed{}
	for i := range batch {
		class, ms, err := classAndTime(batch[i].JSON)
		if err != nil {
			return fmt.Errorf("export sink %s: event of entry %s (session %q position %d): %w",
				s.c.Name, batch[i].EntryHash, batch[i].SessionID, batch[i].Position, err)
		}
		k := partition{class, time.UnixMilli(ms).UTC().Format("20060102")}
		byPart[k] = append(byPart[k], timed{ms, &batch[i]})
	}
	// Each file's rows in the order of their time (the lakes ask for it),
	// in log order within a millisecond.
	groups := make(map[partition][]export.Event, len(byPart))
	for k, ts := range byPart {
		slices.SortStableFunc(ts, func(a, b timed) int { return cmp.Compare(a.ms, b.ms) })
		evs := make([]export.Event, len(ts))
		for i, t := range ts {
			evs[i] = *t.ev
		}
		groups[k] = evs
	}
	keys := make([]partition, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b partition) int {
		return cmp.Or(cmp.Compare(a.class, b.class), strings.Compare(a.day, b.day))
	})
	// The file name is the sink and the batch's leaf range: a batch sent
	// again after a failure replaces its own files rather than adding
	// copies beside them.
	name := fmt.Sprintf("%s-%d-%d.parquet", s.c.Name, eventLeaf(&batch[0]), eventLeaf(&batch[len(batch)-1]))
	// The files are encoded and put a few at a time: encoding takes the
	// cores, and fsyncs or uploads overlap.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parquetParallel)
	for _, k := range keys {
		g.Go(func() error {
			var buf bytes.Buffer
			if err := writeParquet(&buf, k.class, groups[k], s.opts); err != nil {
				return fmt.Errorf("export sink %s: class %d: %w", s.c.Name, k.class, err)
			}
			key := s.p.partitionPath(k) + "/" + name
			if err := s.store.put(gctx, key, buf.Bytes()); err != nil {
				return fmt.Errorf("export sink %s: couldn't put %s: %w", s.c.Name, key, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// partitionPath is the directory of k's files under the sink's root.
func (p *parquetConfig) partitionPath(k partition) string {
	var dir string
	if p.layout == "security-lake" {
		dir = fmt.Sprintf("%s_%d/region=%s/accountId=%s/eventDay=%s", p.source, k.class, p.region, p.accountID, k.day)
	} else {
		dir = fmt.Sprintf("class_uid=%d/event_day=%s", k.class, k.day)
	}
	if p.prefix != "" {
		return p.prefix + "/" + dir
	}
	return dir
}

func (s *parquetSink) Close() error { return nil }
