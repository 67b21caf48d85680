package tlogpub

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// Metrics of publication, beside the log's own tree-size gauges: the tree
// size in the bucket, the tiles written and the failed rounds.
var (
	meter             = otel.Meter("github.com/acsledger/acsledger/ledger/tlogpub")
	bucketTreeSize, _ = meter.Int64Gauge("acsledger.tlogpub.published_tree_size",
		metric.WithDescription("Tree size of the checkpoint object in the object-storage bucket."))
	tilesWritten, _ = meter.Int64Counter("acsledger.tlogpub.tiles",
		metric.WithDescription("Tiles and entry bundles written to the bucket."))
	failedRounds, _ = meter.Int64Counter("acsledger.tlogpub.failures",
		metric.WithDescription("Publication rounds that failed (the store was down, slow or refused a write); each is retried."))
)

func recordPublished(ctx context.Context, size uint64) { bucketTreeSize.Record(ctx, int64(size)) }
func recordTile(ctx context.Context)                   { tilesWritten.Add(ctx, 1) }
func recordFailure(ctx context.Context)                { failedRounds.Add(ctx, 1) }
