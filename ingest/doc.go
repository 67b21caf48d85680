// Package ingest takes in the decision records other guards already write
// and turns each into a ContextEntry of a ledger session, or into a
// quarantined record with a reason: never neither.
//
// Four sources are read, each by a strict parser, a mapping and checks
// (docs/ingest.md explains each mapping with an example):
//
//   - OPA decision logs, as OPA's decision-log plugin uploads them (gzip
//     JSON arrays) [OPA decision logs];
//   - bash-guard decisions (decision-output.v1) and its audit lines;
//   - A2H resolutions, pushed by a Hub with an A2H-Signature header or
//     archived [A2H] (spec §6, §9.2);
//   - another ACS Guardian's traffic, as request/response envelope pairs.
//
// Every entry carries the source record's exact text (member
// "source_record"), so the chain commits to it and an auditor can re-check
// a source signature offline from an exported bundle alone. Records are
// idempotent on each source's natural key (ledger.IngestStore).
//
// [OPA decision logs]: https://www.openpolicyagent.org/docs/management-decision-logs
// [A2H]: https://a2hprotocol.org
package ingest
