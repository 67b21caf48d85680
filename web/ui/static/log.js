// acsledger UI: the auditor's log page. It shows the latest checkpoint,
// the keys, the tree's growth, and checks a pasted checkpoint, chain_hash
// receipt (docs/receipts.md) or evidence bundle step by step in this browser (verify.js), beside the
// server's answer. Every value goes into the page as text.
"use strict";

let logInfo = null;

async function logPage() {
  try {
    logInfo = await getJSON(`${API}/log`);
  } catch (e) {
    document.getElementById("checkpoint").textContent = `Could not read the log: ${e.message}`;
    return;
  }
  document.getElementById("checkpoint").textContent = logInfo.checkpoint || "The log has no checkpoint yet.";
  const keys = document.getElementById("keys");
  for (const k of logInfo.log_keys) {
    keys.append(el("li", {}, "Log key: ", el("code", { class: "key" }, k)));
  }
  for (const k of logInfo.witnesses) {
    keys.append(el("li", {}, "Witness: ", el("code", { class: "key" }, k)));
  }
  keys.append(el("li", {}, `Witness quorum: ${logInfo.witness_quorum}`));
  document.getElementById("trusted").value = logInfo.log_keys.concat(logInfo.witnesses).join("\n");
  document.getElementById("size-chart").append(lineChart("Tree size at each checkpoint",
    logInfo.tree_sizes.map((p) => ({ x: new Date(p.at), y: p.size }))));
  if (logInfo.checkpoint) {
    signatureTable(logInfo.checkpoint);
  }
  document.getElementById("file").addEventListener("change", async (ev) => {
    const f = ev.target.files[0];
    if (f) {
      document.getElementById("input").value = await f.text();
    }
  });
  document.getElementById("check-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    runCheck();
  });
}

// trusted returns the keys in the box: the log's (named as the
// checkpoint's origin) and the witnesses'.
function trusted(origin) {
  const lines = document.getElementById("trusted").value.split("\n").map((s) => s.trim()).filter((s) => s);
  return {
    log: lines.filter((k) => k.split("+")[0] === origin),
    witnesses: lines.filter((k) => k.split("+")[0] !== origin),
  };
}

async function signatureTable(note) {
  const table = document.getElementById("signatures");
  const tbody = table.querySelector("tbody");
  let cp;
  try {
    cp = ACSVerify.parseCheckpoint(note);
  } catch (e) {
    return;
  }
  const keys = trusted(cp.origin);
  const canCheck = ACSVerify.available() && (await ACSVerify.ed25519Supported());
  for (const s of cp.sigs) {
    const key = keys.log.concat(keys.witnesses).find((k) => k.split("+")[0] === s.name);
    const kind = s.name === cp.origin ? "log" : "witness";
    let result = "no trusted key of this name";
    if (key && canCheck) {
      const r = await ACSVerify.checkSignature(cp, key);
      result = r.status === "valid" ? "✓ valid" : r.status === "unsupported" ? "not checked here (ML-DSA-44): the server's verdict applies" : `✗ ${r.status}`;
    } else if (key) {
      result = "not checked: this browser has no Ed25519 in WebCrypto";
    }
    tbody.append(el("tr", {}, el("td", {}, el("code", {}, s.name)), el("td", {}, kind), el("td", {}, result)));
  }
  table.hidden = false;
}

// A check's report: steps shown as they run, findings with acsverify's
// codes.
class Report {
  constructor() {
    this.list = document.getElementById("browser-steps");
    this.list.textContent = "";
    this.findings = [];
    this.box = document.getElementById("browser-verdict");
    this.box.className = "verdict";
    this.box.textContent = "Checking…";
  }

  step(ok, text) {
    const mark = ok === true ? "✓" : ok === false ? "✗" : "•";
    this.list.append(el("li", { class: ok === true ? "ok" : ok === false ? "bad" : "info" }, `${mark} ${text}`));
  }

  fail(code, text, index) {
    this.findings.push({ code, entry_index: index === undefined ? -1 : index });
    this.step(false, `${code}: ${text}`);
  }

  done(what) {
    const codes = [...new Set(this.findings.map((f) => f.code))];
    this.box.dataset.codes = codes.join(" ");
    this.box.textContent = "";
    if (codes.length === 0) {
      this.box.className = "verdict ok";
      this.box.append(el("p", {}, el("strong", {}, "✓ Verified in this browser: "), what));
    } else {
      this.box.className = "verdict bad";
      this.box.append(el("p", {}, el("strong", {}, "✗ Refused in this browser: "), codes.join(", ")));
    }
  }
}

function serverAnswer(verified, text, codes) {
  const box = document.getElementById("server-verdict");
  box.textContent = "";
  box.dataset.codes = (codes || []).join(" ");
  if (verified === null) {
    box.className = "verdict";
    box.append(el("p", {}, text));
    return;
  }
  box.className = verified ? "verdict ok" : "verdict bad";
  box.append(el("p", {}, el("strong", {}, verified ? "✓ The server says verified: " : "✗ The server says not verified: "), text));
}

async function runCheck() {
  const raw = document.getElementById("input").value;
  const rep = new Report();
  serverAnswer(null, "Asking…");
  if (!ACSVerify.available()) {
    rep.step(false, "This page is not a secure context, so WebCrypto is unavailable: only the server's answer can be shown.");
    rep.box.textContent = "Not checked in this browser.";
    return;
  }
  const t = raw.trim();
  try {
    if (/^[0-9a-f]{64}$/.test(t)) {
      await checkChainHash(rep, t);
    } else if (t.startsWith("c2sp.org/tlog-proof@v1\n")) {
      await checkReceipt(rep, t + "\n");
    } else if (t.startsWith("{")) {
      await checkBundle(rep, t);
    } else {
      await checkCheckpointInput(rep, t + "\n");
    }
  } catch (e) {
    rep.step(false, `Could not read the input: ${e.message}`);
    rep.box.className = "verdict error";
    rep.box.textContent = `Could not read the input: ${e.message}`;
  }
}

// checkNote checks a checkpoint's signatures against the trusted keys
// (or, when none is given, keys the caller found elsewhere).
async function checkNote(rep, cp, label, fallback) {
  let keys = trusted(cp.origin);
  if (keys.log.length === 0 && fallback) {
    keys = fallback;
    rep.step(null, "keys_from_bundle: no trusted log key given, so the bundle's own keys are used (they prove nothing about who made it).");
  }
  if (!(await ACSVerify.ed25519Supported())) {
    rep.step(null, `${label}: this browser's WebCrypto has no Ed25519; the signature is left to the server's answer.`);
    return;
  }
  if (keys.log.length === 0) {
    rep.fail("checkpoint_signature_invalid", `${label}: no trusted key for the log ${cp.origin}`);
  }
  for (const k of keys.log) {
    const r = await ACSVerify.checkSignature(cp, k);
    if (r.status === "valid") {
      rep.step(true, `${label} (size ${cp.size}): the log's signature by ${k.split("+")[0]} verifies (Ed25519).`);
    } else if (r.status === "unsupported") {
      rep.step(null, `${label}: the log's ML-DSA-44 signature is not checked here; the server's answer covers it.`);
    } else {
      rep.fail("checkpoint_signature_invalid", `${label} (size ${cp.size}): the log's signature is ${r.status}${r.why ? " (" + r.why + ")" : ""}.`);
    }
  }
  const quorum = (fallback && fallback.quorum) || logInfo.witness_quorum || 0;
  let valid = 0;
  let unchecked = 0;
  for (const k of keys.witnesses) {
    const r = await ACSVerify.checkSignature(cp, k);
    if (r.status === "valid") {
      valid++;
      rep.step(true, `${label}: witness ${k.split("+")[0]} cosigned it.`);
    } else if (r.status === "unsupported") {
      unchecked++;
      rep.step(null, `${label}: witness ${k.split("+")[0]}'s ML-DSA-44 cosignature is left to the server.`);
    } else if (r.status === "invalid") {
      rep.step(false, `${label}: witness ${k.split("+")[0]}'s cosignature does not verify.`);
    }
  }
  if (valid < quorum && valid + unchecked < quorum) {
    rep.fail("witness_quorum_not_met", `${label}: ${valid} of the ${quorum} witness cosignatures needed verify.`);
  } else if (quorum > 0) {
    rep.step(valid >= quorum ? true : null, `${label}: ${valid} witness cosignature(s) verified here, quorum ${quorum}.`);
  }
}

async function checkCheckpointInput(rep, note) {
  const cp = ACSVerify.parseCheckpoint(note);
  rep.step(null, `Read a checkpoint of ${cp.origin} at size ${cp.size}, root ${ACSVerify.hex(cp.root)}.`);
  await checkNote(rep, cp, "The checkpoint");
  await checkEarlier(rep, cp);
  rep.done(`the checkpoint of size ${cp.size} is signed by the keys you trust.`);
  const latest = logInfo.checkpoint ? ACSVerify.parseCheckpoint(logInfo.checkpoint) : null;
  if (!latest) {
    serverAnswer(null, "The server has no checkpoint.");
  } else if (latest.size === cp.size) {
    const same = ACSVerify.hex(latest.root) === ACSVerify.hex(cp.root);
    serverAnswer(same, same ? `its latest checkpoint has this size and root.` : `its latest checkpoint has this size and another root.`, same ? [] : ["log_fork"]);
  } else {
    serverAnswer(null, `The server's latest checkpoint has size ${latest.size}.`);
  }
}

// checkEarlier checks, when the auditor pasted an earlier checkpoint,
// that the log only grew between it and cp, with a consistency proof the
// server serves and this browser checks.
async function checkEarlier(rep, cp) {
  const text = document.getElementById("earlier").value.trim();
  if (!text) {
    return;
  }
  const old = ACSVerify.parseCheckpoint(text + "\n");
  await checkNote(rep, old, "The earlier checkpoint");
  if (old.size > cp.size) {
    rep.fail("consistency_proof_invalid", `the earlier checkpoint (size ${old.size}) is larger than the later one (size ${cp.size})`);
    return;
  }
  const resp = await getJSON(`${API}/proofs/consistency?old=${old.size}&new=${cp.size}`);
  const ok = await ACSVerify.verifyConsistency(old.size, cp.size, resp.proof.map(ACSVerify.unb64), old.root, cp.root);
  if (ok) {
    rep.step(true, `Consistency: the tree of size ${cp.size} extends the one of size ${old.size} (${resp.proof.length} proof hashes).`);
  } else {
    rep.fail("consistency_proof_invalid", `the log of size ${cp.size} does not extend the one you kept at size ${old.size}: it was rewritten`);
  }
}

async function checkChainHash(rep, hash) {
  const sid = document.getElementById("session").value.trim();
  if (!sid) {
    rep.step(false, "A chain_hash names an entry in a session: give the session id too.");
    rep.box.textContent = "Give the session id.";
    return;
  }
  const base = `${API}/sessions/${segment(sid)}`;
  const sess = await getJSON(base);
  let pos = sess.length - 1;
  if (sess.chain_hash !== hash) {
    rep.step(null, `This is not the session's current head (${sess.chain_hash}); looking for the entry that has it.`);
    pos = -1;
    for (let from = 0; from < sess.length && pos < 0; from += 1000) {
      const page = await getJSON(`${base}/entries?from=${from}&limit=1000`);
      const hit = page.entries.find((e) => e.entry_hash === hash);
      pos = hit ? hit.position : -1;
    }
    if (pos < 0) {
      rep.fail("anchor_without_entry", `no entry of session ${sid} has entry_hash ${hash}`);
      rep.done("");
      return;
    }
  }
  const page = await getJSON(`${base}/entries?from=${pos}&limit=1`);
  const e = page.entries[0];
  const full = Object.assign({}, e.entry, { previous_hash: e.previous_hash, entry_hash: e.entry_hash });
  const recomputed = await ACSVerify.entryHash(full);
  if (recomputed === hash) {
    rep.step(true, `Chain: entry ${pos}'s content and previous_hash hash to ${hash} (JCS, SHA-256).`);
  } else {
    rep.fail("entry_hash_mismatch", `entry ${pos} hashes to ${recomputed}, not ${hash}`, pos);
  }
  if (!logInfo.checkpoint) {
    rep.fail("not_anchored", "the log has no checkpoint yet", pos);
    rep.done("");
    return;
  }
  const cp = ACSVerify.parseCheckpoint(logInfo.checkpoint);
  await checkNote(rep, cp, "The latest checkpoint");
  const leaf = await ACSVerify.leafHash(sid, pos, hash);
  rep.step(null, `Leaf: SHA-256(0x00 ‖ JCS({entry_hash, position: ${pos}, session_id, v: 1})) = ${ACSVerify.hex(leaf)}.`);
  let proof;
  try {
    proof = await getJSON(`${API}/proofs/inclusion?entry_hash=${hash}&tree_size=${cp.size}`);
  } catch (err) {
    rep.fail("not_anchored", `the log has no leaf for it at size ${cp.size}: ${err.message}`, pos);
    rep.done("");
    return;
  }
  const ok = await ACSVerify.verifyInclusion(leaf, proof.leaf_index, cp.size, proof.proof.map(ACSVerify.unb64), cp.root);
  if (ok) {
    rep.step(true, `Inclusion: leaf ${proof.leaf_index} leads through ${proof.proof.length} hashes to the root ${ACSVerify.hex(cp.root)} of size ${cp.size}.`);
  } else {
    rep.fail("inclusion_proof_invalid", `the proof does not lead from leaf ${proof.leaf_index} to the checkpoint's root`, pos);
  }
  await checkEarlier(rep, cp);
  rep.done(`entry ${pos} of ${sid} is in the log at size ${cp.size}.`);
  try {
    const sv = await getJSON(`${base}/verify`);
    serverAnswer(sv.verified, `${sv.entries} entries of the session replayed on the server.`, (sv.findings || []).map((f) => f.code));
  } catch (err) {
    serverAnswer(null, `The server did not answer: ${err.message}`);
  }
}

function contentBearing(stepType) {
  return /^(steps|protocols|agbom)\//.test(stepType);
}

async function checkBundle(rep, text) {
  const b = JSON.parse(text);
  if (b.format !== "acsledger-evidence-bundle" || b.version !== 1) {
    throw new Error("not an acsledger evidence bundle, version 1");
  }
  const sid = b.session_id;
  let entries = b.entries || [];
  let responses = b.responses || [];
  if (b.steps) {
    entries = b.steps.map((s) => s.entry);
    responses = b.steps.map((s) => s.response).filter((r) => r);
  }
  rep.step(null, `Read the bundle of session ${sid}: ${entries.length} entries, ${responses.length} responses, ${(b.checkpoints || []).length} checkpoints.`);

  // 1. The chain.
  const chain = await ACSVerify.replayChain(entries);
  for (const f of chain.findings) {
    rep.fail(f.code, f.message, f.entry_index);
  }
  if (chain.findings.length === 0) {
    rep.step(true, `Chain: all ${entries.length} entry hashes recompute and link (ACS §8.2).`);
  }
  const edited = new Set(chain.findings.filter((f) => f.code === "entry_hash_mismatch").map((f) => f.entry_index));

  // 2. The heads the Guardian signed (signatures: the server's answer).
  const published = new Map();
  for (const r of responses) {
    const res = r && r.result;
    if (res && typeof res.chain_hash === "string" && typeof res.request_id === "string") {
      published.set(res.request_id, res.chain_hash);
    }
  }
  let diverged = false;
  let headsOK = 0;
  entries.forEach((e, i) => {
    const pub = published.get(e.step_id);
    if (pub === undefined) {
      if (responses.length > 0 && contentBearing(e.step_type)) {
        rep.fail("entry_without_response", `no signed response publishes the head of entry ${i}`, i);
      }
      return;
    }
    published.delete(e.step_id);
    if (pub === chain.heads[i] || (edited.has(i) && pub === e.entry_hash)) {
      headsOK++;
      diverged = false;
      return;
    }
    if (!diverged) {
      rep.fail("chain_mismatch", `the Guardian signed chain_hash ${pub} for entry ${i}, but the chain recomputes to ${chain.heads[i]}`, i);
    }
    diverged = true;
  });
  for (const id of published.keys()) {
    rep.fail("response_without_entry", `a response publishes a head for request ${id}, which no entry has`);
  }
  if (responses.length > 0) {
    rep.step(null, `Published heads: ${headsOK} signed chain_hash values match the recomputed chain. The responses' signatures are checked by the server.`);
  }

  // 3. Checkpoints, their consistency, and the anchors.
  const bundleKeys = b.keys || {};
  const fallback = { log: bundleKeys.log_keys || [], witnesses: bundleKeys.witnesses || [], quorum: bundleKeys.witness_quorum || 0 };
  const bySize = new Map();
  for (const note of b.checkpoints || []) {
    const cp = ACSVerify.parseCheckpoint(note);
    bySize.set(String(cp.size), cp);
    await checkNote(rep, cp, "Checkpoint", fallback);
  }
  for (const c of b.consistency_proofs || []) {
    const o = bySize.get(String(c.old_size));
    const n = bySize.get(String(c.new_size));
    const ok = o && n && (await ACSVerify.verifyConsistency(c.old_size, c.new_size, c.proof.map(ACSVerify.unb64), o.root, n.root));
    if (ok) {
      rep.step(true, `Consistency: size ${c.new_size} extends size ${c.old_size}.`);
    } else {
      rep.fail("consistency_proof_invalid", `the proof from size ${c.old_size} to ${c.new_size} does not verify`);
    }
  }
  let through = 0;
  for (const [k, a] of (b.anchors || []).entries()) {
    if (a.position >= entries.length) {
      rep.fail("anchor_without_entry", `anchors[${k}] names position ${a.position}, past the chain's end`);
      continue;
    }
    const cp = bySize.get(String(a.tree_size));
    const leaf = await ACSVerify.leafHash(sid, a.position, chain.heads[a.position]);
    const ok = cp && (await ACSVerify.verifyInclusion(leaf, a.leaf_index, a.tree_size, a.proof.map(ACSVerify.unb64), cp.root));
    through = Math.max(through, a.position + 1);
    if (ok) {
      rep.step(true, `Inclusion: entry ${a.position}'s leaf (index ${a.leaf_index}) leads to the root of the checkpoint of size ${a.tree_size}.`);
    } else {
      rep.fail("inclusion_proof_invalid", `anchors[${k}]: the proof does not lead from entry ${a.position}'s leaf to the root of size ${a.tree_size}`, a.position);
    }
  }
  if (through < entries.length) {
    rep.fail("not_anchored", `entries from ${through} on are in no checkpoint the bundle carries`, through);
  }
  await checkEarlierAgainst(rep, bySize);
  rep.done(`the chain, its published heads and its anchors check out.`);

  if (!me || (me.role !== "admin" && me.role !== "auditor")) {
    serverAnswer(null, "Your role may not ask the server to verify a bundle (auditors and admins may).");
    return;
  }
  const resp = await fetch(`${API}/verify/bundle`, { method: "POST", headers: csrfHeaders({ "Content-Type": "application/json" }), body: text });
  const body = await resp.json().catch(() => null);
  if (!resp.ok || !body) {
    serverAnswer(null, `The server refused the bundle: ${(body && body.error) || resp.status}`);
    return;
  }
  const codes = [...new Set((body.findings || []).map((f) => f.code))];
  serverAnswer(body.verified, body.verified ? `${body.entries} entries.` : codes.join(", "), codes);
}

// checkEarlierAgainst checks the auditor's earlier checkpoint against the
// newest checkpoint of a bundle.
async function checkEarlierAgainst(rep, bySize) {
  if (bySize.size === 0 || !document.getElementById("earlier").value.trim()) {
    return;
  }
  const newest = [...bySize.values()].sort((a, b) => (a.size < b.size ? 1 : -1))[0];
  await checkEarlier(rep, newest);
}

PAGES.log = logPage;

// policyRefs lists the policy references an entry's decision cites, as
// acsverify reads them: a top-level policy_references, then the decision
// object's; each as {policy_id, policy_version, rule_id}, "" where absent.
function policyRefs(entry) {
  const refs = [];
  const add = (list) => {
    if (!Array.isArray(list)) {
      return;
    }
    for (const r of list) {
      const o = r || {};
      refs.push({ policy_id: o.policy_id || "", policy_version: o.policy_version || "", rule_id: o.rule_id || "" });
    }
  };
  add(entry.policy_references);
  if (entry.decision && typeof entry.decision === "object") {
    add(entry.decision.policy_references);
  }
  return refs;
}

// checkReceipt checks a receipt (docs/receipts.md), a c2sp.org/tlog-proof
// whose extra data names one entry: the extra data in RFC 8785 form, the
// entry's hash, the inclusion of its leaf in the checkpoint, the
// checkpoint's signatures, the head the signed response published, the
// policy references, and that the log's latest checkpoint extends the
// receipt's. The response's signature is left to acsverify.
async function checkReceipt(rep, doc) {
  const cut = doc.indexOf("\n\n");
  if (cut < 0) {
    throw new Error("a tlog-proof has an empty line before its checkpoint");
  }
  const head = doc.slice(0, cut).split("\n");
  if (!head[1] || !head[1].startsWith("extra ")) {
    throw new Error("the proof has no extra data, so it names no entry: not an acsledger receipt");
  }
  const m = /^index (0|[1-9][0-9]*)$/.exec(head[2] || "");
  if (!m) {
    throw new Error("the third line is not \"index N\"");
  }
  const index = BigInt(m[1]);
  const proof = head.slice(3).map((l) => {
    const h = ACSVerify.unb64(l);
    if (h.length !== 32 || btoa(String.fromCharCode(...h)) !== l) {
      throw new Error(`not a base64 SHA-256 proof line: ${l}`);
    }
    return h;
  });
  const extraB64 = head[1].slice(6);
  const extraBytes = ACSVerify.unb64(extraB64);
  if (btoa(String.fromCharCode(...extraBytes)) !== extraB64) {
    throw new Error("the extra line is not canonical base64");
  }
  const extraText = new TextDecoder("utf-8", { fatal: true }).decode(extraBytes);
  const x = JSON.parse(extraText);
  if (x.format !== "acsledger-receipt" || x.version !== 1) {
    throw new Error("the extra data is not an acsledger receipt, version 1");
  }
  if (ACSVerify.jcs(x) !== extraText) {
    throw new Error("the extra data is not in RFC 8785 form");
  }
  const cp = ACSVerify.parseCheckpoint(doc.slice(cut + 2));
  const e = x.entry;
  const disposition = e.decision && typeof e.decision === "object" ? e.decision.disposition : e.decision;
  rep.step(null, `Read the receipt of session ${x.session_id} position ${x.position}: ${e.step_type} ${disposition || ""} (step ${e.step_id}) at ${e.timestamp}.`);
  if (typeof x.timestamp_token === "string") {
    // RFC 3161 (CMS, X.509 chains) is not checked in the browser.
    rep.step(null, "The receipt carries an RFC 3161 time-stamp token of its checkpoint; this page does not check it: use acsverify receipt --tsa-cert FILE (timestamp_not_checked).");
  }

  const recomputed = await ACSVerify.entryHash(e);
  if (e.entry_hash === recomputed) {
    rep.step(true, `Entry: its content and previous_hash hash to ${recomputed} (JCS, SHA-256).`);
  } else {
    rep.fail("entry_hash_mismatch", `the entry hashes to ${recomputed}, not to its stated entry_hash ${e.entry_hash}`, 0);
  }
  if (typeof e.session_id === "string" && e.session_id !== x.session_id) {
    rep.fail("receipt_session_mismatch", `the entry names session ${e.session_id}, the receipt ${x.session_id}`, 0);
  }
  await checkNote(rep, cp, "The receipt's checkpoint");
  const leaf = await ACSVerify.leafHash(x.session_id, x.position, recomputed);
  if (index < cp.size && await ACSVerify.verifyInclusion(leaf, index, cp.size, proof, cp.root)) {
    rep.step(true, `Inclusion: leaf ${index} (session, position ${x.position}, entry_hash) leads through ${proof.length} hashes to the root of size ${cp.size}.`);
  } else {
    rep.fail("inclusion_proof_invalid", `the proof does not lead from the leaf of position ${x.position} at index ${index} to the checkpoint's root`, 0);
  }
  if (x.response) {
    const r = x.response.result || {};
    if (r.request_id !== e.step_id || (r.chain_hash != null && r.chain_hash !== recomputed)) {
      rep.fail("chain_mismatch", `the response answers ${r.request_id} with chain_hash ${r.chain_hash}, not this step's head ${recomputed}`, 0);
    } else {
      rep.step(true, `Response: it answers this step and published chain_hash ${recomputed}; its signature (${(r.signature || {}).algorithm || "none"}) is checked by acsverify receipt --trust, not here.`);
    }
  } else if (contentBearing(e.step_type)) {
    rep.fail("entry_without_response", "the receipt carries no signed response for this step", 0);
  }
  const cited = JSON.stringify(policyRefs(e));
  if (cited !== JSON.stringify(x.policy_references)) {
    rep.fail("receipt_policy_mismatch", "the receipt's policy_references are not the versions the decision cites", 0);
  } else {
    for (const p of x.policy_references) {
      rep.step(true, `Policy: ${p.policy_id} version ${p.policy_version}, rule ${p.rule_id}, as the decision cites it.`);
    }
  }
  const latest = logInfo.checkpoint ? ACSVerify.parseCheckpoint(logInfo.checkpoint) : null;
  if (latest && latest.origin === cp.origin && latest.size > cp.size) {
    const resp = await getJSON(`${API}/proofs/consistency?old=${cp.size}&new=${latest.size}`);
    if (await ACSVerify.verifyConsistency(cp.size, latest.size, resp.proof.map(ACSVerify.unb64), cp.root, latest.root)) {
      rep.step(true, `Later: the log's latest checkpoint (size ${latest.size}) extends the receipt's (size ${cp.size}).`);
    } else {
      rep.fail("consistency_proof_invalid", `the log's latest checkpoint (size ${latest.size}) is not shown to extend the receipt's (size ${cp.size})`);
    }
  }
  rep.done(`session ${x.session_id} position ${x.position}: ${disposition || e.step_type}, in the log at size ${cp.size}.`);

  const resp = await fetch(`${API}/sessions/${segment(x.session_id)}/entries/${x.position}/receipt`, { credentials: "same-origin" });
  if (resp.status === 403) {
    serverAnswer(null, "Your role may not download receipts (auditors and admins may).");
  } else if (!resp.ok) {
    serverAnswer(false, `the server has no receipt for this entry (${resp.status}).`, []);
  } else {
    const same = (await resp.text()) === doc;
    serverAnswer(same, same ? "it issues this same receipt for the entry." : "it issues another receipt for this entry.", []);
  }
}

