// Package tlog is the ledger's Merkle log: one leaf per appended ContextEntry,
// sequenced in batches by a background integrator, hashed per RFC 6962, served
// as C2SP tiles and signed as C2SP checkpoints.
//
// The pieces, in data-flow order:
//
//   - [Leaf] and [Leaf.MarshalJCS]: the leaf encoding, a JCS object committing
//     to (session_id, position, entry_hash).
//   - [Storage]: the consumer-owned contract the integrator and the readers
//     need, a [Writer] and a [Reader] (whose [TileReader] is what proofs
//     are built from). Each store implements it over its own database and returns it
//     from LogStorage (ledger/pgstore, ledger/sqlitestore); the package
//     itself holds no SQL and imports no driver. ledger/tlog/tlogstoretest
//     is the conformance suite both stores run.
//   - [Log]: the sequencer/integrator loop, the checkpoint signer and the
//     proof builders.
//   - Tile paths ([TilePath], [ParseTilePath]), entry bundles
//     ([AppendBundleEntry], [ParseBundle]) and checkpoints ([Checkpoint]).
//   - Note signers: Ed25519 log signatures through
//     golang.org/x/mod/sumdb/note, ML-DSA-44 and Ed25519 cosignatures per
//     c2sp.org/tlog-cosignature. Checkpoints and verifier keys are read
//     with package verify's readers ([verify.ParseCheckpoint],
//     [verify.NoteVerifier]), the ones auditors run, so the log and its
//     verifier cannot disagree about the format.
//
// [RFC 6962]: https://www.rfc-editor.org/rfc/rfc6962
// [tlog-tiles]: https://c2sp.org/tlog-tiles
// [tlog-checkpoint]: https://c2sp.org/tlog-checkpoint
// [signed-note]: https://c2sp.org/signed-note
// [tlog-cosignature]: https://c2sp.org/tlog-cosignature
// [tlog-witness]: https://c2sp.org/tlog-witness
// [tlog-proof]: https://c2sp.org/tlog-proof
package tlog
