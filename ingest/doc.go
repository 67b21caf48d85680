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
// Every entry commits to the source record's exact bytes by their SHA-256
// (member "source_sha256"); the bytes are stored beside the entry, sealed
// and erasable, and an exported bundle carries them while they exist, so
// an auditor can re-check a source signature offline. An entry holds what
// the decision was, never what identifies the client (OPA's requested_by,
// bash-guard's hostname): that stays in the source record. OPAMapper.
// SubjectPath makes a decision's subject its session's agent id, which
// erasure by subject matches. Records are idempotent on each source's
// natural key (ledger.IngestStore).
//
// [OPA decision logs]: https://www.openpolicyagent.org/docs/management-decision-logs
// [A2H]: https://a2hprotocol.org
package ingest
