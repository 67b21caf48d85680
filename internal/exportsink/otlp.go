package exportsink

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/acsledger/acsledger/ledger/export"
)

// otlpSink exports each batch as OTLP/HTTP log records through
// OpenTelemetry's own exporter, called synchronously (no batch processor:
// the ledger is the backlog, and the cursor moves only when Export
// returned nil). Each record's body is the event JSON; its attributes name
// the entry (acsledger.session_id, acsledger.position,
// acsledger.entry_hash, acsledger.cursor) and its event name is
// "acsledger.<format>".
type otlpSink struct {
	c      Config
	exp    *otlploghttp.Exporter
	logger otellog.Logger
	recs   *collect
}

// collect is a log processor that keeps what is emitted, so the SDK
// fills each record's resource, scope and limits, and the sink exports
// the batch itself, synchronously.
type collect struct{ recs []sdklog.Record }

func (c *collect) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (c *collect) OnEmit(_ context.Context, r *sdklog.Record) error {
	c.recs = append(c.recs, r.Clone())
	return nil
}
func (c *collect) Shutdown(context.Context) error   { return nil }
func (c *collect) ForceFlush(context.Context) error { return nil }

func newOTLP(c Config) (*otlpSink, error) {
	u := *c.url
	u.Scheme = "http"
	opts := []otlploghttp.Option{otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false})}
	if c.Kind == "otlp+https" {
		u.Scheme = "https"
		opts = append(opts, otlploghttp.WithTLSClientConfig(c.tls))
	} else {
		opts = append(opts, otlploghttp.WithInsecure())
	}
	q := u.Query()
	headers := map[string]string{}
	if t := q.Get("token"); t != "" {
		headers["Authorization"] = "Bearer " + t
	}
	if len(headers) > 0 {
		opts = append(opts, otlploghttp.WithHeaders(headers))
	}
	u.RawQuery, u.User = "", nil
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/logs"
	}
	opts = append(opts, otlploghttp.WithEndpointURL(u.String()))
	exp, err := otlploghttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("export sink %s: %w", c.Name, err)
	}
	recs := &collect{}
	res := resource.NewSchemaless(attribute.String("service.name", "acsledger"))
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(recs), sdklog.WithResource(res))
	return &otlpSink{c: c, exp: exp, recs: recs, logger: lp.Logger("github.com/acsledger/acsledger/internal/exportsink")}, nil
}

func (s *otlpSink) Send(ctx context.Context, batch []export.Event) error {
	s.recs.recs = s.recs.recs[:0]
	name := "acsledger." + string(s.c.Format)
	for _, e := range batch {
		var r otellog.Record
		r.SetTimestamp(e.RecordedAt)
		r.SetObservedTimestamp(e.RecordedAt)
		r.SetEventName(name)
		r.SetSeverity(otellog.SeverityInfo)
		r.SetBody(attribute.StringValue(string(e.JSON)))
		r.AddAttributes(
			attribute.String("acsledger.session_id", e.SessionID),
			attribute.Int64("acsledger.position", e.Position),
			attribute.String("acsledger.entry_hash", e.EntryHash),
			attribute.String("acsledger.cursor", e.Cursor),
		)
		s.logger.Emit(ctx, r)
	}
	if err := s.exp.Export(ctx, s.recs.recs); err != nil {
		return fmt.Errorf("export sink %s: OTLP export to %s: %w", s.c.Name, s.c.Redacted, err)
	}
	return nil
}

func (s *otlpSink) Close() error {
	return s.exp.Shutdown(context.Background())
}
