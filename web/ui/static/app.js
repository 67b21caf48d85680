// acsledger UI. Every value from the API goes into the page as a text node
// (el() and textContent), never as markup: entries carry attacker-influenced
// strings.
"use strict";

const API = "/api/v1";
const PAGE = 100;

function el(tag, attrs, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    n.setAttribute(k, v);
  }
  for (const c of children) {
    n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return n;
}

async function getJSON(url) {
  const resp = await fetch(url, { headers: { Accept: "application/json" } });
  let body = null;
  try {
    body = await resp.json();
  } catch (e) {
    throw new Error(`${url} answered ${resp.status} without JSON`);
  }
  if (!resp.ok) {
    throw new Error((body && body.error) || `${url} answered ${resp.status}`);
  }
  return body;
}

function when(s) {
  if (!s) {
    return "—";
  }
  return String(s).replace("T", " ").replace(/(\.\d+)?Z$/, " UTC");
}

// segment escapes a session id for one URL path segment the way Go's
// net/url does: the server routes on the raw path when the client's escaping
// differs from Go's, and then sees the id still escaped.
function segment(s) {
  return encodeURIComponent(s)
    .replace(/%(24|26|2B|2C|3A|3B|3D|40)/g, (m) => decodeURIComponent(m))
    .replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
}

function short(h) {
  return h ? String(h).slice(0, 12) + "…" : "—";
}

function hashCell(h) {
  const td = el("td", { class: "hash" });
  if (h) {
    td.append(el("code", { title: h }, short(h)));
  } else {
    td.append("—");
  }
  return td;
}

function status(msg, isError) {
  const p = document.getElementById("status");
  p.textContent = msg;
  p.classList.toggle("error", !!isError);
  p.hidden = msg === "";
}

// --- sessions list -------------------------------------------------------

const FILTERS = ["agent_id", "step_type", "since", "until"];

async function sessionsPage() {
  const here = new URLSearchParams(location.search);
  const form = document.getElementById("filters");
  const q = new URLSearchParams();
  for (const name of FILTERS) {
    const v = here.get(name) || "";
    form.elements[name].value = v;
    if (v) {
      q.set(name, v);
    }
  }
  if (here.get("cursor")) {
    q.set("cursor", here.get("cursor"));
  }
  q.set("limit", here.get("limit") || String(PAGE));
  dashboard();
  let page;
  try {
    page = await getJSON(`${API}/sessions?${q}`);
  } catch (e) {
    status(`Could not list sessions: ${e.message}`, true);
    return;
  }
  const tbody = document.querySelector("#sessions tbody");
  for (const s of page.sessions) {
    const link = el("a", { href: "/ui/sessions/" + segment(s.session_id) }, s.session_id);
    tbody.append(el("tr", {},
      el("th", { scope: "row" }, link),
      el("td", {}, s.agent_id),
      el("td", { class: "num" }, s.length),
      el("td", {}, when(s.created_at)),
      el("td", {}, when(s.updated_at)),
      hashCell(s.chain_hash)));
  }
  document.getElementById("sessions").hidden = page.sessions.length === 0;
  const filtered = FILTERS.some((n) => here.get(n));
  status(page.sessions.length === 0 ? (filtered ? "No session matches these filters." : "The ledger holds no sessions yet.") : "");
  if (page.next) {
    const nq = new URLSearchParams(here);
    nq.set("cursor", page.next);
    const next = document.getElementById("next");
    next.href = "/ui/?" + nq;
    next.hidden = false;
  }
}

// dashboard shows the last whole-ledger re-verification when the admin
// status is readable without credentials; otherwise the line stays hidden.
async function dashboard() {
  let st;
  try {
    st = await getJSON(`${API}/admin/reverify`);
  } catch (e) {
    return;
  }
  const p = document.getElementById("dashboard");
  if (st.current) {
    p.textContent = `Whole-ledger re-verification running since ${when(st.current.started)}.`;
  } else if (st.last) {
    const l = st.last;
    const verdict = l.failed ? `FAILED for ${l.failed} session(s)` : "all verified";
    p.textContent = `Last whole-ledger re-verification, finished ${when(l.finished)}: ${l.sessions} sessions, ${l.entries} entries, ${verdict}.`;
  } else {
    p.textContent = "The whole ledger has not been re-verified since the server started.";
  }
  p.hidden = false;
}

// --- one session ---------------------------------------------------------

function sessionIDFromPath() {
  const rest = location.pathname.slice("/ui/sessions/".length);
  return decodeURIComponent(rest);
}

// decisionOf reads an entry's decision whichever way it is written: the
// disposition as a string, or a decision object with its reason codes.
function decisionOf(entry) {
  let disposition = "";
  let codes = [];
  const d = entry && entry.decision;
  if (typeof d === "string") {
    disposition = d;
  } else if (d && typeof d === "object") {
    disposition = String(d.decision || d.disposition || "");
    if (Array.isArray(d.reason_codes)) {
      codes = d.reason_codes;
    }
  }
  if (codes.length === 0 && entry && Array.isArray(entry.reason_codes)) {
    codes = entry.reason_codes;
  }
  return { disposition, codes: codes.map(String) };
}

async function sessionPage() {
  const id = sessionIDFromPath();
  const base = `${API}/sessions/${segment(id)}`;
  document.getElementById("session-id").textContent = id;
  document.title = `Session ${id} · acsledger`;
  document.getElementById("bundle-link").href = `${base}/bundle`;
  document.getElementById("jsonl-link").href = `${base}/entries?format=jsonl`;
  verdict(base);
  try {
    const s = await getJSON(base);
    const dl = document.getElementById("summary");
    for (const [k, v] of [["Agent", s.agent_id], ["Entries", s.length], ["Created", when(s.created_at)],
      ["Last appended", when(s.updated_at)], ["Chain head", s.chain_hash]]) {
      dl.append(el("dt", {}, k), el("dd", {}, k === "Chain head" ? el("code", {}, v) : v));
    }
  } catch (e) {
    status(`Could not load the session: ${e.message}`, true);
    return;
  }
  let from = 0;
  const more = document.getElementById("more");
  const load = async () => {
    more.disabled = true;
    let page;
    try {
      page = await getJSON(`${base}/entries?from=${from}&limit=${PAGE}`);
    } catch (e) {
      status(`Could not load entries: ${e.message}`, true);
      return;
    }
    const tbody = document.querySelector("#entries tbody");
    for (const e of page.entries) {
      const d = decisionOf(e.entry);
      const dcell = el("td", {});
      if (d.disposition) {
        dcell.append(el("span", { class: "disp disp-" + d.disposition.toLowerCase().replace(/[^a-z_]/g, "") }, d.disposition));
      } else {
        dcell.append("—");
      }
      tbody.append(el("tr", {},
        el("td", { class: "num" }, e.position),
        el("td", {}, el("code", {}, e.step_type)),
        el("td", {}, when(e.timestamp || e.recorded_at)),
        dcell,
        el("td", {}, d.codes.length ? d.codes.join(", ") : "—"),
        el("td", {}, e.step_id),
        hashCell(e.entry_hash)));
      from = e.position + 1;
    }
    document.getElementById("entries").hidden = tbody.children.length === 0;
    status(tbody.children.length === 0 ? "This session has no entries." : "");
    more.hidden = page.entries.length < PAGE;
    more.disabled = false;
  };
  more.addEventListener("click", load);
  await load();
}

// verdict shows the server's verification report in plain words.
async function verdict(base) {
  const box = document.getElementById("verdict");
  let rep;
  try {
    rep = await getJSON(`${base}/verify`);
  } catch (e) {
    box.textContent = `Could not verify: ${e.message}`;
    box.className = "verdict error";
    return;
  }
  box.textContent = "";
  const findings = rep.findings || [];
  if (rep.verified) {
    box.className = "verdict ok";
    box.append(el("p", {}, el("strong", {}, "✓ Verified: "),
      `all ${rep.entries} entries check out; the chain head is `, el("code", {}, rep.head || "—"), "."));
  } else {
    box.className = "verdict bad";
    box.append(el("p", {}, el("strong", {}, "✗ Not verified: "),
      `${findings.length} finding${findings.length === 1 ? "" : "s"} over ${rep.entries} entries.`));
  }
  if (findings.length) {
    box.append(findingsTable("Findings", findings));
  }
  if (rep.notices && rep.notices.length) {
    box.append(findingsTable("Notices (do not fail verification)", rep.notices));
  }
}

function findingsTable(caption, list) {
  const tbody = el("tbody", {});
  for (const f of list) {
    const where = f.entry_index >= 0 ? `entry ${f.entry_index}` : (f.where || "the bundle");
    tbody.append(el("tr", {},
      el("td", {}, el("code", {}, f.code)),
      el("td", {}, where),
      el("td", {}, f.message || "")));
  }
  return el("table", { class: "findings" },
    el("caption", {}, caption),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Code"), el("th", { scope: "col" }, "Where"), el("th", { scope: "col" }, "What"))),
    tbody);
}

document.addEventListener("DOMContentLoaded", () => {
  const page = document.body.dataset.page;
  if (page === "sessions") {
    sessionsPage();
  } else if (page === "session") {
    sessionPage();
  }
});
