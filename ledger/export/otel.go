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
// set), read when /metrics is scraped. The names are the API's words
// (docs/export.md, "Counters").
const instrumentationName = "github.com/acsledger/acsledger/ledger/export"

var attrSink = attribute.Key("acsledger.sink")

// RegisterMetrics publishes ds' state through the global meter provider:
// acsledger.export.entries_behind, .seconds_behind, .resend_window,
// .acknowledged, .sent_unconfirmed, .resent and .failing (1 while the
// last attempt failed).
func RegisterMetrics(ds []*Deliverer) error {
	if len(ds) == 0 {
		return nil
	}
	m := otel.Meter(instrumentationName)
	behind, errBehind := m.Int64ObservableGauge("acsledger.export.entries_behind",
		metric.WithDescription("Ledger entries a sink has not acknowledged yet (a sink that never confirms: not sent yet)."))
	seconds, errSeconds := m.Float64ObservableGauge("acsledger.export.seconds_behind", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest entry counted in entries_behind (0 when caught up)."))
	window, errWindow := m.Int64ObservableGauge("acsledger.export.resend_window",
		metric.WithDescription("Entries a sink that never confirms (plain TCP syslog) would send again if its connection failed now."))
	acked, errAcked := m.Int64ObservableCounter("acsledger.export.acknowledged",
		metric.WithDescription("Entries the receiver acknowledged (RELP rsp, HTTP 2xx, HEC ack, OTLP success, file fsync), since the sink's cursor was created."))
	unconfirmed, errUnconfirmed := m.Int64ObservableCounter("acsledger.export.sent_unconfirmed",
		metric.WithDescription("Entries written to a receiver that never confirms (plain TCP syslog), each once."))
	resent, errResent := m.Int64ObservableCounter("acsledger.export.resent",
		metric.WithDescription("Sends of entries that had been sent before (possible duplicates at the receiver)."))
	failing, errFailing := m.Int64ObservableGauge("acsledger.export.failing",
		metric.WithDescription("1 while a sink's last attempt to send or to check its connection failed, else 0."))
	if err := errors.Join(errBehind, errSeconds, errWindow, errAcked, errUnconfirmed, errResent, errFailing); err != nil {
		return err
	}
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, d := range ds {
			st := d.Status()
			set := metric.WithAttributes(attrSink.String(d.Name))
			o.ObserveInt64(behind, int64(st.EntriesBehind), set)
			o.ObserveFloat64(seconds, st.SecondsBehind, set)
			o.ObserveInt64(window, int64(st.ResendWindow), set)
			o.ObserveInt64(acked, st.Acknowledged, set)
			o.ObserveInt64(unconfirmed, st.SentUnconfirmed, set)
			o.ObserveInt64(resent, st.Resent, set)
			f := int64(0)
			if st.Failing {
				f = 1
			}
			o.ObserveInt64(failing, f, set)
		}
		return nil
	}, behind, seconds, window, acked, unconfirmed, resent, failing)
	return err
}
