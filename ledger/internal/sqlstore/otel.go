package sqlstore

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// The store's metrics, on the global meter provider (a no-op until the
// program installs one): how far the search projection is behind the
// committed entries (migration 0019), read from each open store when
// metrics are collected.
const instrumentationName = "github.com/acsledger/acsledger/ledger/internal/sqlstore"

var (
	meter        = otel.Meter(instrumentationName)
	searchLag, _ = meter.Float64ObservableGauge("acsledger.search.projection.lag",
		metric.WithUnit("s"),
		metric.WithDescription("How long ago the oldest committed entry the search projection has not taken yet was recorded; 0 when it is current."))
)

// observeSearchLag reports s's search watermark at each collection until
// the returned registration is unregistered.
func (s *Store) observeSearchLag() (metric.Registration, error) {
	return meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		w, err := s.SearchWatermark(ctx)
		if err != nil {
			return err
		}
		o.ObserveFloat64(searchLag, w.Lag.Seconds())
		return nil
	}, searchLag)
}
