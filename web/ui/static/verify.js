// acsledger's in-browser verifier: the arithmetic of an evidence check,
// run by the auditor's own browser with WebCrypto, so that a verdict does
// not rest on the server's word (docs/ui.md, "Checking in the browser").
// It shares no code with the server's verifier (verify/, in Go): it is a
// second implementation on purpose, and its finding codes are the ones
// acsverify names (docs/findings.md).
//
// SHA-256 and Ed25519 are WebCrypto's (crypto.subtle). ML-DSA-44
// cosignatures and the responses' signatures are not checked here: the
// page says so and shows the server's answer for them.
//
// [RFC 8785]: https://www.rfc-editor.org/rfc/rfc8785
// [RFC 9162]: https://www.rfc-editor.org/rfc/rfc9162 (Merkle proofs)
// [C2SP signed-note]: https://c2sp.org/signed-note
"use strict";

const ACSVerify = (() => {
  const enc = new TextEncoder();

  function available() {
    return typeof crypto !== "undefined" && !!crypto.subtle;
  }

  async function sha256(bytes) {
    return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  }

  function concat(...parts) {
    const n = parts.reduce((s, p) => s + p.length, 0);
    const out = new Uint8Array(n);
    let i = 0;
    for (const p of parts) {
      out.set(p, i);
      i += p.length;
    }
    return out;
  }

  function hex(b) {
    return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  }

  function unhex(s) {
    if (typeof s !== "string" || !/^[0-9a-f]{64}$/.test(s)) {
      return null;
    }
    const out = new Uint8Array(32);
    for (let i = 0; i < 32; i++) {
      out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
    }
    return out;
  }

  function unb64(s) {
    const bin = atob(s);
    return Uint8Array.from(bin, (c) => c.charCodeAt(0));
  }

  function equal(a, b) {
    return a.length === b.length && a.every((x, i) => x === b[i]);
  }

  // jcs returns the RFC 8785 form of a parsed JSON value. Strings and
  // numbers are serialized as ECMAScript's JSON.stringify does, which is
  // what RFC 8785 §3.2.2 specifies; members are sorted by their names'
  // UTF-16 code units (§3.2.3), which is what Array.prototype.sort does
  // with no comparator. A lone surrogate is refused (§3.2.2.2).
  function jcs(v) {
    if (v === null || typeof v === "boolean") {
      return JSON.stringify(v);
    }
    if (typeof v === "number") {
      if (!Number.isFinite(v)) {
        throw new Error("JCS: a number is not finite");
      }
      return JSON.stringify(v);
    }
    if (typeof v === "string") {
      if (/[\ud800-\udbff](?![\udc00-\udfff])|(^|[^\ud800-\udbff])[\udc00-\udfff]/.test(v)) {
        throw new Error("JCS: a string holds a lone surrogate");
      }
      return JSON.stringify(v);
    }
    if (Array.isArray(v)) {
      return "[" + v.map(jcs).join(",") + "]";
    }
    const keys = Object.keys(v).sort();
    return "{" + keys.map((k) => jcs(k) + ":" + jcs(v[k])).join(",") + "}";
  }

  // entryHash is ACS §8.2: SHA-256 of the UTF-8 JCS of the entry without
  // entry_hash and previous_hash, followed by the raw 32 bytes of its own
  // previous_hash (nothing for the first entry).
  async function entryHash(entry) {
    const rest = Object.assign({}, entry);
    delete rest.entry_hash;
    delete rest.previous_hash;
    const prev = entry.previous_hash == null ? new Uint8Array(0) : unhex(entry.previous_hash);
    if (prev === null) {
      throw new Error("previous_hash is not 64 lowercase hex digits");
    }
    return hex(await sha256(concat(enc.encode(jcs(rest)), prev)));
  }

  // replayChain checks a chain the way acsverify chain does: each
  // entry_hash recomputed, each link to the entry before. It returns the
  // findings and the recomputed head at each entry.
  async function replayChain(entries) {
    const findings = [];
    const heads = [];
    let link = null;
    let alt = null;
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i];
      const add = (code, expected, actual, message) =>
        findings.push({ code, entry_index: i, entry_id: e.entry_id, expected, actual, message });
      const recomputed = await entryHash(e);
      let stated = recomputed;
      if (e.entry_hash == null) {
        add("entry_hash_mismatch", recomputed, "", `entry ${i} has no entry_hash; it hashes to ${recomputed}`);
      } else if (e.entry_hash !== recomputed) {
        stated = e.entry_hash;
        add("entry_hash_mismatch", recomputed, stated, `entry ${i} hashes to ${recomputed}, not to its stated entry_hash ${stated}`);
      }
      if (i === 0) {
        if (e.previous_hash != null) {
          add("root_has_previous", "", e.previous_hash, "the first entry has a previous_hash");
        }
      } else if (e.previous_hash == null) {
        add("previous_hash_mismatch", link, "", `entry ${i} has a null previous_hash`);
      } else if (e.previous_hash !== link && e.previous_hash !== alt) {
        add("previous_hash_mismatch", link, e.previous_hash, `entry ${i}'s previous_hash is not entry ${i - 1}'s entry_hash`);
      }
      link = stated;
      alt = recomputed;
      heads.push(recomputed);
    }
    return { findings, heads };
  }

  // leafHash is the acsledger log's leaf for one entry (ledger/tlog,
  // docs/merkle-log.md): SHA-256(0x00 || JCS of {entry_hash, position,
  // session_id, v: 1}).
  async function leafHash(sessionID, position, entryHashHex) {
    const leaf = jcs({ entry_hash: entryHashHex, position, session_id: sessionID, v: 1 });
    return sha256(concat(new Uint8Array([0]), enc.encode(leaf)));
  }

  async function node(l, r) {
    return sha256(concat(new Uint8Array([1]), l, r));
  }

  // walkProof is the walk up the tree that RFC 9162's inclusion
  // (§2.1.3.2) and consistency (§2.1.4.2) checks share: from the node
  // indices fn and sn, each hash c of path is a left sibling, hashed in
  // by left(c), or a right one, hashed in by right(c). It reports whether
  // the walk ends at the root (sn reaches 0 with the last hash).
  async function walkProof(fn, sn, path, left, right) {
    for (const c of path) {
      if (sn === 0n) {
        return false;
      }
      if ((fn & 1n) === 1n || fn === sn) {
        await left(c);
        if ((fn & 1n) === 0n) {
          while ((fn & 1n) === 0n && fn !== 0n) {
            fn >>= 1n;
            sn >>= 1n;
          }
        }
      } else {
        await right(c);
      }
      fn >>= 1n;
      sn >>= 1n;
    }
    return sn === 0n;
  }

  // verifyInclusion is RFC 9162 §2.1.3.2. Sizes are BigInts: a tree may
  // outgrow JavaScript's 32-bit bit operators.
  async function verifyInclusion(leaf, index, size, proof, root) {
    const fn = BigInt(index);
    const sn = BigInt(size) - 1n;
    if (fn > sn) {
      return false;
    }
    let r = leaf;
    const walked = await walkProof(fn, sn, proof,
      async (p) => { r = await node(p, r); },
      async (p) => { r = await node(r, p); });
    return walked && equal(r, root);
  }

  // verifyConsistency is RFC 9162 §2.1.4.2.
  async function verifyConsistency(oldSize, newSize, proof, oldRoot, newRoot) {
    let first = BigInt(oldSize);
    const second = BigInt(newSize);
    if (first > second || first === 0n) {
      return false;
    }
    if (first === second) {
      return proof.length === 0 && equal(oldRoot, newRoot);
    }
    let path = proof.slice();
    if ((first & (first - 1n)) === 0n) {
      path = [oldRoot].concat(path);
    }
    if (path.length === 0) {
      return false;
    }
    let fn = first - 1n;
    let sn = second - 1n;
    while ((fn & 1n) === 1n) {
      fn >>= 1n;
      sn >>= 1n;
    }
    let fr = path[0];
    let sr = path[0];
    const walked = await walkProof(fn, sn, path.slice(1),
      async (c) => {
        fr = await node(c, fr);
        sr = await node(c, sr);
      },
      async (c) => { sr = await node(sr, c); });
    return walked && equal(fr, oldRoot) && equal(sr, newRoot);
  }

  // parseCheckpoint splits a signed note (C2SP signed-note) into its text
  // and signature lines and reads the checkpoint's origin, size and root
  // (C2SP tlog-checkpoint).
  function parseCheckpoint(note) {
    const cut = note.indexOf("\n\n");
    if (cut < 0) {
      throw new Error("a checkpoint is text, a blank line, then signature lines");
    }
    const text = note.slice(0, cut + 1);
    const lines = text.split("\n");
    if (lines.length < 4 || !/^[1-9][0-9]*$|^0$/.test(lines[1])) {
      throw new Error("the checkpoint's second line is not a tree size");
    }
    const root = unb64(lines[2]);
    if (root.length !== 32) {
      throw new Error("the checkpoint's third line is not a base64 SHA-256 root");
    }
    const sigs = [];
    for (const line of note.slice(cut + 2).split("\n")) {
      if (line === "") {
        continue;
      }
      const m = /^\u2014 (\S+) (\S+)$/.exec(line);
      if (!m) {
        throw new Error(`not a signature line: ${line}`);
      }
      sigs.push({ name: m[1], sig: unb64(m[2]), line });
    }
    return { text, origin: lines[0], size: BigInt(lines[1]), root, sigs };
  }

  // parseKey reads a signed-note verifier key: name+hash+base64(type||key).
  function parseKey(vkey) {
    const parts = vkey.trim().split("+");
    if (parts.length < 3) {
      throw new Error(`not a verifier key: ${vkey}`);
    }
    const name = parts[0];
    const raw = unb64(parts.slice(2).join("+"));
    return { name, id: parseInt(parts[1], 16), type: raw[0], key: raw.slice(1), vkey };
  }

  async function keyID(name, type, key) {
    const h = await sha256(concat(enc.encode(name + "\n"), new Uint8Array([type]), key));
    return ((h[0] << 24) | (h[1] << 16) | (h[2] << 8) | h[3]) >>> 0;
  }

  async function ed25519Verify(pub, sig, msg) {
    const k = await crypto.subtle.importKey("raw", pub, { name: "Ed25519" }, false, ["verify"]);
    return crypto.subtle.verify({ name: "Ed25519" }, k, sig, msg);
  }

  // ed25519Supported reports whether this browser's WebCrypto has
  // Ed25519 (Chromium 137 and later, Firefox 129, Safari 17).
  async function ed25519Supported() {
    try {
      await crypto.subtle.importKey("raw", new Uint8Array(32), { name: "Ed25519" }, false, ["verify"]);
      return true;
    } catch (e) {
      return false;
    }
  }

  // checkSignature checks the signature lines of cp made by vkey: an
  // Ed25519 note signature (type 0x01) or an Ed25519 cosignature/v1 (type
  // 0x04). It answers "valid", "invalid", "absent" or "unsupported"
  // (ML-DSA-44 subtree/v1, type 0x06).
  async function checkSignature(cp, vkey) {
    const k = parseKey(vkey);
    if ((await keyID(k.name, k.type, k.key)) !== k.id) {
      return { status: "invalid", why: "the key's hash does not match its name and key" };
    }
    const lines = cp.sigs.filter((s) => s.name === k.name && s.sig.length >= 4 &&
      (((s.sig[0] << 24) | (s.sig[1] << 16) | (s.sig[2] << 8) | s.sig[3]) >>> 0) === k.id);
    if (lines.length === 0) {
      return { status: "absent" };
    }
    if (k.type !== 0x01 && k.type !== 0x04) {
      return { status: "unsupported", why: `key type 0x${k.type.toString(16).padStart(2, "0")} is not checked in the browser` };
    }
    for (const s of lines) {
      const body = s.sig.slice(4);
      let ok = false;
      if (k.type === 0x01 && body.length === 64) {
        ok = await ed25519Verify(k.key, body, enc.encode(cp.text));
      } else if (k.type === 0x04 && body.length === 72) {
        let ts = 0n;
        for (const b of body.slice(0, 8)) {
          ts = (ts << 8n) | BigInt(b);
        }
        const msg = concat(enc.encode(`cosignature/v1\ntime ${ts}\n`), enc.encode(cp.text));
        ok = await ed25519Verify(k.key, body.slice(8), msg);
      }
      if (ok) {
        return { status: "valid" };
      }
    }
    return { status: "invalid", why: "the signature does not verify" };
  }

  return {
    available, ed25519Supported, sha256, hex, unhex, unb64, jcs, entryHash, replayChain, leafHash,
    verifyInclusion, verifyConsistency, parseCheckpoint, parseKey, checkSignature,
  };
})();
