package export

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Telemetry of delivery: the figures of GET /api/v1/exports, per sink,
// labelled by the sink's name (an operator's flag value, a small fixed
// set), read when /metrics is scraped.
const instrumentationName = "github.com/acsledger/acsledger/ledger/export"

var attrSink = attribute.Key("acsledger.sink")

// RegisterMetrics publishes ds' state through the global meter provider:
// acsledger.export.entries_behind, .seconds_behind, .delivered,
// .redelivered and .errors (1 while the last attempt failed).
func RegisterMetrics(ds []*Deliverer) error {
	if len(ds) == 0 {
		return nil
	}
	m := otel.Meter(instrumentationName)
	behind, errBehind := m.Int64ObservableGauge("acsledger.export.entries_behind",
		metric.WithDescription("Ledger entries a sink has not acknowledged yet."))
	seconds, errSeconds := m.Float64ObservableGauge("acsledger.export.seconds_behind", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest entry a sink has not acknowledged (0 when caught up)."))
	delivered, errDelivered := m.Int64ObservableCounter("acsledger.export.delivered",
		metric.WithDescription("Entries a sink acknowledged, since its cursor was created."))
	redelivered, errRedelivered := m.Int64ObservableCounter("acsledger.export.redelivered",
		metric.WithDescription("Entries sent to a sink again after a restart (possible duplicates)."))
	failing, errFailing := m.Int64ObservableGauge("acsledger.export.failing",
		metric.WithDescription("1 while a sink's last delivery attempt failed, else 0."))
	if err := errors.Join(errBehind, errSeconds, errDelivered, errRedelivered, errFailing); err != nil {
		return err
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, d := range ds {
			st := d.Status()
			set := metric.WithAttributes(attrSink.String(d.Name))
			o.ObserveInt64(behind, int64(st.EntriesBehind), set)
			o.ObserveFloat64(seconds, st.SecondsBehind, set)
			o.ObserveInt64(delivered, st.Delivered, set)
			o.ObserveInt64(redelivered, st.Redelivered, set)
			f := int64(0)
			if d.failing() {
				f = 1
			}
			o.ObserveInt64(failing, f, set)
		}
		return nil
	}, behind, seconds, delivered, redelivered, failing)
	return err
}
