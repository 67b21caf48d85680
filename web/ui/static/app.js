// acsledger UI. Every value from the API goes into the page as a text node
// (el() and textContent), never as markup: entries carry attacker-influenced
// strings.
"use strict";

const API = "/api/v1";
const PAGE = 100;

// PAGES holds the page functions other scripts (search.js, log.js) add,
// by the body's data-page.
const PAGES = {};

// me is the logged-in credential (GET /api/v1/whoami): its name, role and
// the UI session's CSRF token, which every state-changing call carries in
// X-CSRF-Token. The session itself is an HttpOnly cookie no script reads.
let me = null;

function csrfHeaders(extra) {
  return Object.assign({ Accept: "application/json", "X-CSRF-Token": (me && me.csrf_token) || "" }, extra || {});
}

// loggingOut is set when the logout form is submitted: the server ends the
// UI session before the browser leaves the page, so a fetch still in flight
// gets 401, and its toLogin must not replace the logout's own redirect (the
// login page that says "You are logged out.").
let loggingOut = false;

function toLogin() {
  if (loggingOut) {
    return;
  }
  location.assign("/ui/login?" + new URLSearchParams({ next: location.pathname + location.search }));
}

// whoami learns who is logged in and removes what the role may not use:
// elements whose data-roles does not name it. The server refuses those
// routes anyway; the page does not offer them.
async function whoami() {
  const resp = await fetch(`${API}/whoami`, { headers: { Accept: "application/json" } });
  if (resp.status === 401) {
    toLogin();
    return false;
  }
  me = await resp.json();
  document.body.dataset.role = me.role;
  for (const n of document.querySelectorAll("[data-roles]")) {
    if (!n.dataset.roles.split(" ").includes(me.role)) {
      n.remove();
    }
  }
  const who = document.getElementById("who");
  if (who) {
    who.textContent = `${me.name} (${me.role})`;
  }
  const form = document.getElementById("logout");
  if (form) {
    form.elements.csrf.value = me.csrf_token || "";
    form.addEventListener("submit", () => {
      loggingOut = true;
    });
  }
  return true;
}

const LOGIN_ERRORS = {
  missing: "Paste a token first.",
  malformed: "That is not an acsledger token: tokens start with acsl_ and have 48 characters.",
  unknown: "This server does not know that token.",
  expired: "That token has expired.",
  revoked: "That token has been revoked.",
  logged_out: "You are logged out.",
};

function loginPage() {
  const q = new URLSearchParams(location.search);
  const next = q.get("next") || "";
  if (next.startsWith("/ui/")) {
    document.getElementById("next").value = next;
  }
  const why = q.get("error");
  if (why) {
    const p = document.getElementById("login-error");
    p.textContent = LOGIN_ERRORS[why] || "The server refused the token.";
    p.classList.toggle("error", why !== "logged_out");
    p.hidden = false;
  }
}

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
  if (resp.status === 401) {
    toLogin();
  }
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

// filterQuery fills the filters form with the named filters of the page's
// own query (here) and returns the query of those that are set.
function filterQuery(here, form, names) {
  const q = new URLSearchParams();
  for (const name of names) {
    const v = here.get(name) || "";
    if (v) {
      form.elements[name].value = v;
      q.set(name, v);
    }
  }
  return q;
}

// showNext links the #next page of a listing (at page's next cursor),
// when there is one, as the page at path with the query here.
function showNext(page, here, path) {
  if (page.next) {
    const nq = new URLSearchParams(here);
    nq.set("cursor", page.next);
    const next = document.getElementById("next");
    next.href = path + "?" + nq;
    next.hidden = false;
  }
}

// listPage reads one page of a listing of the API (path, filtered by q)
// at the cursor and limit of the page's own query (here). When that fails
// it says so (failed, then why) and returns null.
async function listPage(path, q, here, failed) {
  if (here.get("cursor")) {
    q.set("cursor", here.get("cursor"));
  }
  q.set("limit", here.get("limit") || String(PAGE));
  try {
    return await getJSON(`${API}/${path}?${q}`);
  } catch (e) {
    status(`${failed}: ${e.message}`, true);
    return null;
  }
}

// --- sessions list -------------------------------------------------------

const FILTERS = ["agent_id", "step_type", "since", "until"];

async function sessionsPage() {
  const here = new URLSearchParams(location.search);
  const form = document.getElementById("filters");
  const q = filterQuery(here, form, FILTERS);
  const page = await listPage("sessions", q, here, "Could not list sessions");
  if (page === null) {
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
      hashCell(s.chain_hash),
      integrityCell(s.session_id)));
  }
  document.getElementById("sessions").hidden = page.sessions.length === 0;
  fillIntegrity([...tbody.querySelectorAll("td.integrity-cell")]);
  const filtered = FILTERS.some((n) => here.get(n));
  status(page.sessions.length === 0 ? (filtered ? "No session matches these filters." : "The ledger holds no sessions yet.") : "");
  showNext(page, here, "/ui/");
}

// --- one session ---------------------------------------------------------

function sessionIDFromPath() {
  const rest = location.pathname.slice("/ui/sessions/".length);
  return decodeURIComponent(rest);
}

async function sessionPage() {
  const id = sessionIDFromPath();
  const base = `${API}/sessions/${segment(id)}`;
  document.getElementById("session-id").textContent = id;
  document.title = `Session ${id} · acsledger`;
  if (document.getElementById("export-section")) {
    document.getElementById("bundle-link").href = `${base}/bundle`;
    document.getElementById("jsonl-link").href = `${base}/entries?format=jsonl`;
  }
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
  const tbody = document.querySelector("#entries tbody");
  const fold = { depth: 0, groups: [] };
  const load = async () => {
    more.disabled = true;
    let page;
    try {
      page = await getJSON(`${base}/steps?from=${from}&limit=${PAGE}`);
    } catch (e) {
      status(`Could not load entries: ${e.message}`, true);
      return;
    }
    for (const st of page.steps) {
      tbody.append(stepRow(id, st, fold));
      from = st.position + 1;
    }
    document.getElementById("entries").hidden = tbody.children.length === 0;
    status(tbody.children.length === 0 ? "This session has no entries." : "");
    more.hidden = page.steps.length < PAGE;
    more.disabled = false;
  };
  more.addEventListener("click", load);
  await load();
}

// stepRow is one step of the timeline: what the agent tried, what was
// decided and why, and where the record came from. Steps between a
// subagent's start and stop carry the start's group and fold under it.
function stepRow(sessionID, st, fold) {
  const what = el("td", { class: "what" }, el("code", {}, st.step_type));
  if (st.tool) {
    what.append(" ", el("strong", { class: "tool" }, st.tool));
  }
  if (st.args) {
    what.append(el("div", { class: "args" }, el("code", {}, st.args)));
  }
  if (st.message) {
    what.append(el("div", { class: "message" }, `“${st.message}”`));
  }
  if (st.memory_key) {
    what.append(el("div", { class: "memkey" }, "memory key ", el("code", {}, st.memory_key)));
  }
  if (st.params === "withheld" && !st.tool) {
    what.append(el("div", { class: "help" }, "params withheld for your role"));
  } else if (st.params === "erased") {
    what.append(el("div", { class: "help" }, "params erased"));
  }
  const href = `/ui/decisions/${segment(st.step_id)}?${new URLSearchParams({ session_id: sessionID })}`;
  what.append(el("div", { class: "stepid" }, "step ", el("a", { href }, st.step_id)));
  const decided = el("td", {});
  if (st.decision) {
    const d = st.decision.toLowerCase().replace(/[^a-z_]/g, "");
    decided.append(el("a", { class: "decision-link", href }, el("span", { class: "disp disp-" + d }, st.decision)));
  } else {
    decided.append("—");
  }
  const why = el("td", { class: "why" });
  if (st.reasoning) {
    why.append(el("div", {}, st.reasoning));
  }
  if (st.reason_codes.length) {
    why.append(el("div", {}, el("code", {}, st.reason_codes.join(", "))));
  }
  if (!st.reasoning && !st.reason_codes.length) {
    why.append("—");
  }
  const pol = el("td", {});
  for (const p of st.policy_refs) {
    pol.append(el("div", {}, el("code", {}, `${p.policy_id || "?"}@${p.policy_version || "?"}`), p.rule_id ? ` ${p.rule_id}` : ""));
  }
  if (!st.policy_refs.length) {
    pol.append("—");
  }
  const src = el("td", {}, st.source);
  if (st.flags.length) {
    src.append(el("div", { class: "flags" }, st.flags.join(", ")));
  }
  if (st.source_record) {
    src.append(el("details", {}, el("summary", {}, "source record"), el("code", { class: "record" }, st.source_record)));
  }
  const num = el("td", { class: "num" }, st.position);
  const tr = el("tr", {}, num, what, el("td", {}, when(st.timestamp || st.recorded_at)), decided, why, pol, src, hashCell(st.entry_hash));
  if (fold.groups.length) {
    tr.dataset.group = fold.groups[fold.groups.length - 1];
    tr.classList.add("in-subagent");
  }
  if (st.subagent === "start") {
    const g = `g${st.position}`;
    fold.groups.push(g);
    const btn = el("button", { type: "button", class: "fold", "aria-expanded": "true" }, "▾ subagent");
    btn.addEventListener("click", () => {
      const open = btn.getAttribute("aria-expanded") !== "true";
      btn.setAttribute("aria-expanded", String(open));
      btn.textContent = open ? "▾ subagent" : "▸ subagent";
      for (const row of document.querySelectorAll(`#entries tr[data-group="${g}"]`)) {
        row.hidden = !open;
      }
    });
    num.append(el("div", {}, btn));
  } else if (st.subagent === "stop" && fold.groups.length) {
    fold.groups.pop();
  }
  return tr;
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

// --- dashboard -----------------------------------------------------------

const POLL_MS = 1000;
// COUNT_PAGES bounds the sessions the totals count (pages of 1000).
const COUNT_PAGES = 20;

let pollTimer = null;
let shownLast = "";

// request fetches url and answers its status and JSON body (null when the
// body is not JSON); only a network failure throws.
async function request(url, opts) {
  const resp = await fetch(url, opts);
  let body = null;
  try {
    body = await resp.json();
  } catch (e) {
    body = null;
  }
  return { status: resp.status, ok: resp.ok, body };
}

function errorOf(r) {
  return (r.body && r.body.error) || `the server answered ${r.status}`;
}

function authMessage(msg, isError) {
  const p = document.getElementById("auth");
  p.textContent = msg;
  p.classList.toggle("error", !!isError);
  p.hidden = msg === "";
}

// dashboardPage runs with the UI session: the server lets admins only
// reach it and its API.
async function dashboardPage() {
  if (typeof dashboardCharts === "function") {
    dashboardCharts();
  }
  totals();
  refreshStatus();
  document.getElementById("start").addEventListener("click", startRun);
}

// adminCall calls the re-verification API with the session cookie; the
// POST carries the CSRF token.
function adminCall(method) {
  return request(`${API}/admin/reverify`, { method, headers: csrfHeaders() });
}

function stopPolling() {
  if (pollTimer !== null) {
    clearTimeout(pollTimer);
    pollTimer = null;
  }
}

// refused says why the admin API did not answer.
function refused(r) {
  stopPolling();
  const start = document.getElementById("start");
  switch (r.status) {
    case 401:
      start.disabled = true;
      authMessage("Your session has ended (401 Unauthorized): log in again.", true);
      return;
    case 403:
      start.disabled = true;
      authMessage(`The server refused (403 Forbidden): ${errorOf(r)}.`, true);
      return;
  }
  authMessage(`The admin API answered ${r.status}: ${errorOf(r)}`, true);
}

async function refreshStatus() {
  stopPolling();
  let r;
  try {
    r = await adminCall("GET");
  } catch (e) {
    authMessage(`Could not reach the admin API: ${e.message}`, true);
    if (!document.getElementById("running").hidden) {
      // A run was going: keep asking, more slowly.
      pollTimer = setTimeout(refreshStatus, 3 * POLL_MS);
    }
    return;
  }
  showAnswer(r);
}

async function startRun() {
  const start = document.getElementById("start");
  start.disabled = true;
  let r;
  try {
    r = await adminCall("POST");
  } catch (e) {
    authMessage(`Could not reach the admin API: ${e.message}`, true);
    start.disabled = false;
    return;
  }
  if (r.status === 409) {
    authMessage("A re-verification is already running; showing its progress.", false);
    refreshStatus();
    return;
  }
  showAnswer(r);
}

// showAnswer shows the run status the admin API answered, or why it
// refused.
function showAnswer(r) {
  if (!r.ok) {
    refused(r);
    return;
  }
  authMessage("", false);
  showStatus(r.body);
}

function showStatus(st) {
  const start = document.getElementById("start");
  const box = document.getElementById("running");
  const cur = st.current;
  start.disabled = !!cur;
  if (cur) {
    showProgress(cur);
    box.hidden = false;
    pollTimer = setTimeout(refreshStatus, POLL_MS);
  } else {
    box.hidden = true;
  }
  showLast(st.last);
}

// showProgress shows the running run against the total it counted when it
// started. Sessions created during the run are checked too, so the count
// can pass the total; the bar then stays full rather than overflowing.
function showProgress(cur) {
  const text = document.getElementById("running-text");
  const bar = document.getElementById("progress");
  const since = `Running since ${when(cur.started)}: `;
  if (cur.counting) {
    text.textContent = since + "counting the sessions…";
    bar.removeAttribute("value");
    bar.textContent = "counting";
    return;
  }
  const of = cur.sessions > cur.total ? ` (total at start: ${cur.total})` : ` of ${cur.total}`;
  text.textContent = since + `${cur.sessions}${of} sessions checked, ${cur.entries} entries, ` +
    `${cur.failed} session${cur.failed === 1 ? "" : "s"} not verified so far.`;
  bar.max = Math.max(cur.total, cur.sessions, 1);
  bar.value = cur.sessions;
  bar.textContent = cur.sessions + of;
}

function duration(from, to) {
  const ms = Date.parse(to) - Date.parse(from);
  if (!(ms >= 0)) {
    return "—";
  }
  if (ms < 60000) {
    return `${(ms / 1000).toFixed(ms < 10000 ? 3 : 1)} s`;
  }
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

// showLast shows the last finished run, once per run (the status is polled
// every second while a run goes).
function showLast(l) {
  const box = document.getElementById("last");
  const key = l ? `${l.started} ${l.finished}` : "none";
  if (key === shownLast) {
    return;
  }
  shownLast = key;
  box.textContent = "";
  if (!l) {
    box.className = "";
    box.append(el("p", {}, "No whole-ledger re-verification has finished since the server started."));
    return;
  }
  const failedList = l.failed_sessions || [];
  let head;
  if (l.error) {
    box.className = "verdict bad";
    head = el("p", { id: "last-verdict" }, el("strong", {}, "✗ Stopped early: "), `the run ended after ${l.sessions} sessions: ${l.error}`);
  } else if (l.failed > 0) {
    box.className = "verdict bad";
    head = el("p", { id: "last-verdict" }, el("strong", {}, "✗ Not verified: "), `${l.failed} of ${l.sessions} sessions did not verify.`);
  } else {
    box.className = "verdict ok";
    head = el("p", { id: "last-verdict" }, el("strong", {}, "✓ Verified: "), `all ${l.sessions} sessions check out.`);
  }
  const dl = el("dl", { class: "summary", id: "last-summary" });
  for (const [k, v] of [["Finished", when(l.finished)], ["Took", duration(l.started, l.finished)],
    ["Sessions at start", l.total], ["Sessions checked", l.sessions], ["Entries checked", l.entries],
    ["Sessions with findings", l.failed]]) {
    dl.append(el("dt", {}, k), el("dd", {}, v));
  }
  box.append(el("h3", {}, "Last finished run"), head, dl);
  if (failedList.length === 0) {
    return;
  }
  const tbody = el("tbody", {});
  for (const f of failedList) {
    tbody.append(el("tr", {},
      el("td", {}, sessionLink(f.session_id)),
      el("td", {}, (f.codes || []).join(", ")),
      el("td", { class: "num" }, f.findings_total)));
  }
  box.append(el("table", { id: "failed-sessions" },
    el("caption", {}, "Sessions that did not verify, with the codes of their findings"),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Session"), el("th", { scope: "col" }, "Codes"),
      el("th", { scope: "col" }, "Findings"))),
    tbody));
  if (l.failed > failedList.length) {
    box.append(el("p", {}, `…and ${l.failed - failedList.length} more: a run names at most ${failedList.length}.`));
  }
  box.append(runFindings(failedList),
    el("p", { class: "help" }, "These are the findings the run saw. A session's own page verifies it again, as it stands now."));
}

function sessionLink(id) {
  return el("a", { href: "/ui/sessions/" + segment(id) }, id);
}

// runFindings lists the findings the run kept: the first few of each
// failing session, with a row saying how many more it had.
function runFindings(failed) {
  const tbody = el("tbody", {});
  for (const f of failed) {
    const kept = f.findings || [];
    for (const x of kept) {
      tbody.append(el("tr", {},
        el("td", {}, el("code", {}, x.code)),
        el("td", {}, sessionLink(f.session_id)),
        el("td", { class: "num" }, x.entry_index >= 0 ? x.entry_index : (x.where || "—")),
        el("td", {}, x.message || "")));
    }
    const more = (f.findings_total || 0) - kept.length;
    if (more > 0) {
      tbody.append(el("tr", { class: "more" }, el("td", { colspan: "4" },
        `…and ${more} more finding${more === 1 ? "" : "s"} of `, sessionLink(f.session_id),
        ` (${f.findings_total} in all; the run keeps the first ${kept.length}).`)));
    }
  }
  return el("table", { class: "findings", id: "run-findings" },
    el("caption", {}, "Findings of the run, as it saw them"),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Code"), el("th", { scope: "col" }, "Session"),
      el("th", { scope: "col" }, "Entry"), el("th", { scope: "col" }, "What"))),
    tbody);
}

// totals counts sessions and entries from the sessions list, and the
// recorded policy versions.
async function totals() {
  const dl = document.getElementById("totals");
  let sessions = 0;
  let entries = 0;
  let capped = false;
  try {
    let cursor = "";
    for (let pages = 0; ; pages++) {
      if (pages === COUNT_PAGES) {
        capped = true;
        break;
      }
      const q = new URLSearchParams({ limit: "1000" });
      if (cursor) {
        q.set("cursor", cursor);
      }
      const page = await getJSON(`${API}/sessions?${q}`);
      sessions += page.sessions.length;
      for (const s of page.sessions) {
        entries += s.length;
      }
      cursor = page.next || "";
      if (!cursor) {
        break;
      }
    }
  } catch (e) {
    const p = document.getElementById("totals-status");
    p.textContent = `Could not count sessions: ${e.message}`;
    p.classList.add("error");
    return;
  }
  const more = capped ? "at least " : "";
  const rows = [["Sessions", more + sessions], ["Entries", more + entries]];
  try {
    const pol = await getJSON(`${API}/policies`);
    const list = pol.policies;
    rows.push(["Policy bundle versions", list.length]);
    if (list.length) {
      const p = list[list.length - 1];
      rows.push(["Newest recorded", `${p.policy_id} ${p.policy_version}, ${when(p.recorded_at)}`]);
    }
  } catch (e) {
    rows.push(["Policy bundle versions", "—"]);
  }
  for (const [k, v] of rows) {
    dl.append(el("dt", {}, k), el("dd", {}, v));
  }
  dl.hidden = false;
  document.getElementById("totals-status").hidden = true;
}

// --- one decision ----------------------------------------------------------

function requestIDFromPath() {
  return decodeURIComponent(location.pathname.slice("/ui/decisions/".length));
}

function definitions(dl, rows) {
  for (const [k, v] of rows) {
    dl.append(el("dt", {}, k), el("dd", {}, v));
  }
}

async function decisionPage() {
  const id = requestIDFromPath();
  const hint = new URLSearchParams(location.search).get("session_id") || "";
  document.getElementById("request-id").textContent = id;
  document.title = `Decision ${id} · acsledger`;
  const q = hint ? "?" + new URLSearchParams({ session_id: hint }) : "";
  let d;
  try {
    d = await getJSON(`${API}/decisions/${segment(id)}${q}`);
  } catch (e) {
    status(`Could not load the decision: ${e.message}`, true);
    return;
  }
  status("");
  const back = document.getElementById("session-link");
  back.href = "/ui/sessions/" + segment(d.session_id);
  back.textContent = `← Session ${d.session_id}`;

  definitions(document.getElementById("step"), [
    ["Step type", el("code", {}, d.step_type)],
    ["Timestamp", when(d.timestamp || d.recorded_at)],
    ["Session", el("a", { href: "/ui/sessions/" + segment(d.session_id) }, d.session_id)],
    ["Position", d.position],
    ["Entry hash", el("code", {}, d.entry_hash)],
    ["Previous hash", d.previous_hash ? el("code", {}, d.previous_hash) : "— (first entry)"],
    ["Recorded at", when(d.recorded_at)],
  ]);
  document.getElementById("step-section").hidden = false;
  whatifPanel(d);

  const dec = d.decision && typeof d.decision === "object" ? d.decision : null;
  const section = document.getElementById("decision-section");
  section.hidden = false;
  if (!dec) {
    const disp = typeof d.decision === "string" ? d.decision : "";
    definitions(document.getElementById("decision"), [["Disposition", disp || "— (the step records no decision)"]]);
    noReplay("The step records no policy decision; there is nothing to replay.");
    return;
  }
  const disposition = String(dec.decision || dec.disposition || "");
  const codes = Array.isArray(dec.reason_codes) ? dec.reason_codes.map(String) : [];
  definitions(document.getElementById("decision"), [
    ["Disposition", el("span", { id: "disposition", class: "disp disp-" + disposition.toLowerCase().replace(/[^a-z_]/g, "") }, disposition || "—")],
    ["Read from", d.decision_from === "response" ? "the signed response stored beside the entry" : "the chain entry (no signed response is stored)"],
    ["Reasoning", dec.reasoning || "—"],
    ["Reason codes", el("span", { id: "reason-codes" }, codes.length ? codes.join(", ") : "—")],
  ]);
  const refs = Array.isArray(dec.policy_references) ? dec.policy_references : [];
  const tbody = document.querySelector("#refs tbody");
  for (const r of refs) {
    tbody.append(el("tr", {}, el("td", {}, r.policy_id || "—"), el("td", {}, r.policy_version || "—"), el("td", {}, el("code", {}, r.rule_id || "—"))));
  }
  document.getElementById("refs").hidden = refs.length === 0;
  if (dec.modifications) {
    document.getElementById("modifications-json").textContent = JSON.stringify(dec.modifications, null, 2);
    document.getElementById("modifications").hidden = false;
  }
  if (refs.length === 0 || !refs[0].policy_id) {
    noReplay("The decision cites no policy bundle (the Guardian decided on its own); there is nothing to replay.");
    return;
  }
  replayPanel(d, refs[0]);
}

// decisionSide is one side of a what-if comparison: the decision and the
// rules that fired.
function decisionSide(s) {
  return el("span", {}, el("span", { class: "disp disp-" + String(s.decision).replace(/[^a-z_]/g, "") }, s.decision), " ",
    ...(s.rules || []).map((r) => el("code", { class: "rule" }, r + " ")));
}

// whatifPanel offers the incident question about this step and, opened
// from a what-if report (?whatif=RUN), shows the step's recorded and
// candidate sides with the rules on each.
async function whatifPanel(d) {
  const section = document.getElementById("whatif-section");
  if (!section) {
    return; // the role may not run what-if
  }
  document.getElementById("whatif-incident").href = `/ui/whatif?${new URLSearchParams({ request_id: d.request_id, session_id: d.session_id })}`;
  section.hidden = false;
  const runID = new URLSearchParams(location.search).get("whatif");
  if (!runID) {
    return;
  }
  const box = document.getElementById("whatif-side");
  let run;
  try {
    run = await getJSON(`${API}/whatif/${segment(runID)}`);
  } catch (e) {
    box.textContent = `Could not read the what-if run: ${e.message}`;
    return;
  }
  const here = (c) => c && c.session_id === d.session_id && c.position === d.position;
  let c = (run.changes || []).find(here);
  if (!c && run.summary && here(run.summary.focus)) {
    c = run.summary.focus;
  }
  if (!c) {
    box.append(el("p", { id: "whatif-verdict" }, `Under ${run.candidate} this step's decision does not change.`));
    return;
  }
  box.append(el("table", { id: "whatif-sides" },
    el("caption", {}, `This step under ${run.candidate}`),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Recorded"), el("th", { scope: "col" }, "Candidate"))),
    el("tbody", {}, el("tr", {}, el("td", { id: "whatif-recorded" }, decisionSide(c.recorded)), el("td", { id: "whatif-candidate" }, decisionSide(c.candidate))))));
  if (c.approximate && c.approximate.length) {
    box.append(el("p", { class: "help" }, "Approximate: " + c.approximate.join("; ")));
  }
}

function noReplay(msg) {
  if (!document.getElementById("replay-section")) {
    return; // the role may not replay
  }
  document.getElementById("replay-form").hidden = true;
  document.getElementById("replay-result").textContent = msg;
  document.getElementById("replay-section").hidden = false;
}

async function replayPanel(d, ref) {
  if (!document.getElementById("replay-section")) {
    return; // the role may not replay
  }
  const select = document.getElementById("version");
  select.append(el("option", { value: "" }, `${ref.policy_version} (recorded)`));
  try {
    const pol = await getJSON(`${API}/policies?${new URLSearchParams({ policy_id: ref.policy_id })}`);
    for (const p of pol.policies) {
      if (p.policy_version !== ref.policy_version) {
        select.append(el("option", { value: p.policy_version }, p.policy_version));
      }
    }
  } catch (e) {
    document.getElementById("replay-result").textContent = `Could not list the recorded policy versions: ${e.message}`;
  }
  document.getElementById("replay-section").hidden = false;
  document.getElementById("replay-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const button = document.getElementById("replay");
    const box = document.getElementById("replay-result");
    const body = { session_id: d.session_id };
    if (select.value) {
      body.policy_version = select.value;
    }
    button.disabled = true;
    box.className = "";
    box.textContent = "Replaying…";
    let r;
    try {
      r = await request(`${API}/decisions/${segment(d.request_id)}/replay`, {
        method: "POST",
        headers: csrfHeaders({ "Content-Type": "application/json" }),
        body: JSON.stringify(body),
      });
    } catch (e) {
      r = { ok: false, status: 0, body: { error: e.message } };
    }
    button.disabled = false;
    if (!r.ok) {
      box.className = "verdict error";
      box.textContent = `Replay failed: ${errorOf(r)}`;
      return;
    }
    replayResult(box, r.body);
  });
}

// rulesTable says which rules decided on each side, so a changed outcome
// names the rule that changed it.
function rulesTable(res) {
  const rules = (v) => ((v && v.policy_references) || []).map((r) => `${r.rule_id || "—"} (${r.policy_id || "?"} ${r.policy_version || "?"})`);
  const rec = rules(res.recorded);
  const rep = rules(res.replayed);
  const cell = (list) => el("td", {}, ...(list.length ? list.map((r) => el("div", {}, el("code", {}, r))) : ["none"]));
  return el("table", { id: "rules" },
    el("caption", {}, "Rules that decided"),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, `Recorded: ${res.recorded ? res.recorded.decision : "—"}`),
      el("th", { scope: "col" }, `Replayed: ${res.replayed ? res.replayed.decision : "—"}`))),
    el("tbody", {}, el("tr", {}, cell(rec), cell(rep))));
}

// shown writes one field's value as JSON; absent is a dash.
function shown(v) {
  return v === undefined || v === null ? "—" : JSON.stringify(v);
}

function replayResult(box, res) {
  box.textContent = "";
  const under = `${res.policy_id} ${res.replayed_version}`;
  const got = res.replayed ? res.replayed.decision : "";
  if (res.same_decision) {
    box.className = "verdict ok";
    box.append(el("p", { id: "replay-verdict" }, el("strong", {}, "✓ Same decision: "), `${got} under ${under}, as recorded under ${res.recorded_version}.`));
  } else {
    box.className = "verdict bad";
    box.append(el("p", { id: "replay-verdict" }, el("strong", {}, "✗ Different decision: "), `${got} under ${under}; recorded ${res.recorded ? res.recorded.decision : "—"} under ${res.recorded_version}.`));
  }
  box.append(el("p", { class: "help" },
    `Recorded verdict read from the ${res.recorded_from === "response" ? "signed response" : "chain entry"}; params from the ${res.params_from === "ledger" ? "ledger" : "request"}.`));
  box.append(rulesTable(res));
  const diff = res.diff || [];
  if (diff.length) {
    const tbody = el("tbody", {});
    for (const line of diff) {
      const i = String(line).indexOf(":");
      const field = i > 0 ? line.slice(0, i) : String(line);
      const rec = res.recorded ? res.recorded[field] : undefined;
      const rep = res.replayed ? res.replayed[field] : undefined;
      tbody.append(el("tr", {},
        el("th", { scope: "row" }, el("code", {}, field)),
        el("td", {}, el("code", {}, shown(rec))),
        el("td", {}, el("code", {}, shown(rep)))));
    }
    box.append(el("table", { id: "diff" },
      el("caption", {}, "Fields that differ"),
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Field"), el("th", { scope: "col" }, "Recorded"), el("th", { scope: "col" }, "Replayed"))),
      tbody));
  }
  const nr = res.not_reconstructed || [];
  if (nr.length) {
    const ul = el("ul", { id: "not-reconstructed" });
    for (const x of nr) {
      ul.append(el("li", {}, x));
    }
    box.append(el("p", {}, "Not reconstructed from the ledger (the replay may differ because of these):"), ul);
  }
}

document.addEventListener("DOMContentLoaded", async () => {
  const page = document.body.dataset.page;
  if (page === "login") {
    loginPage();
    return;
  }
  if (!(await whoami())) {
    return;
  }
  if (page === "sessions") {
    sessionsPage();
  } else if (page === "session") {
    sessionPage();
  } else if (page === "dashboard") {
    dashboardPage();
  } else if (page === "decision") {
    decisionPage();
  } else if (PAGES[page]) {
    PAGES[page]();
  }
});
