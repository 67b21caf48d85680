// acsledger UI: the compliance search and each session's integrity at a
// glance. Uses app.js's helpers (el, filterQuery, getJSON, listPage,
// showNext, segment, when); every value goes into the page as text.
"use strict";

const SEARCH_FIELDS = ["as", "agent_id", "since", "until", "decision", "reason_code", "policy_id",
  "policy_version", "tool", "source", "flag", "q"];

const INTEGRITY_TEXT = {
  verified: "✓ verified",
  findings: "✗ findings",
  not_anchored: "… not yet anchored",
  unchecked: "anchored, not re-verified",
};

// fillIntegrity asks the server for the integrity of the sessions whose
// cells are given (td elements with data-session), one request per page.
async function fillIntegrity(cells) {
  if (cells.length === 0) {
    return;
  }
  const q = new URLSearchParams();
  for (const td of cells) {
    q.append("session_id", td.dataset.session);
  }
  let body;
  try {
    body = await getJSON(`${API}/integrity?${q}`);
  } catch (e) {
    for (const td of cells) {
      td.textContent = "unknown";
    }
    return;
  }
  const by = new Map(body.sessions.map((s) => [s.session_id, s]));
  for (const td of cells) {
    const s = by.get(td.dataset.session);
    td.textContent = "";
    if (!s) {
      td.append("unknown");
      continue;
    }
    td.append(el("span", { class: "integrity integrity-" + s.state }, INTEGRITY_TEXT[s.state] || s.state));
    if (s.codes && s.codes.length) {
      td.append(" ", el("code", {}, s.codes.join(", ")));
    }
  }
}

function integrityCell(sessionID) {
  return el("td", { class: "integrity-cell", "data-session": sessionID }, "…");
}

function mayExport() {
  return me && (me.role === "admin" || me.role === "auditor");
}

function bundleCell(h) {
  if (!mayExport()) {
    return el("td", {}, "—");
  }
  return el("td", {}, el("a", { class: "bundle-link", href: h.bundle, download: "" }, "bundle"));
}

async function searchPage() {
  const here = new URLSearchParams(location.search);
  const form = document.getElementById("filters");
  const q = filterQuery(here, form, SEARCH_FIELDS);
  const as = here.get("as") === "sessions" ? "sessions" : "entries";
  if (document.getElementById("exports")) {
    const ex = new URLSearchParams(q);
    ex.set("format", "csv");
    document.getElementById("export-csv").href = `${API}/search/export?${ex}`;
    ex.set("format", "json");
    document.getElementById("export-json").href = `${API}/search/export?${ex}`;
  }
  const page = await listPage("search", q, here, "The search failed");
  if (page === null) {
    return;
  }
  const rows = as === "sessions" ? page.sessions : page.entries;
  if (as === "sessions") {
    const tbody = document.querySelector("#session-hits tbody");
    for (const s of page.sessions) {
      tbody.append(el("tr", {},
        el("th", { scope: "row" }, el("a", { href: "/ui/sessions/" + segment(s.session_id) }, s.session_id)),
        el("td", {}, s.agent_id),
        el("td", { class: "num" }, s.matches),
        el("td", {}, when(s.first)),
        el("td", {}, when(s.last)),
        integrityCell(s.session_id),
        bundleCell(s)));
    }
    document.getElementById("session-hits").hidden = rows.length === 0;
    fillIntegrity([...tbody.querySelectorAll("td.integrity-cell")]);
  } else {
    const tbody = document.querySelector("#entry-hits tbody");
    for (const h of page.entries) {
      const step = el("td", {}, el("code", {}, h.step_type));
      if (h.tool) {
        step.append(" ", el("strong", { class: "tool" }, h.tool));
      }
      const disp = el("td", {});
      if (h.decision) {
        disp.append(el("a", { class: "disp disp-" + h.decision.replace(/[^a-z_]/g, ""),
          href: `/ui/decisions/${segment(h.step_id)}?${new URLSearchParams({ session_id: h.session_id })}` }, h.decision));
      } else {
        disp.append("—");
      }
      const src = el("td", {}, h.source);
      if (h.flags.length) {
        src.append(" ", el("span", { class: "flags" }, h.flags.join(", ")));
      }
      tbody.append(el("tr", {},
        el("td", {}, when(h.recorded_at)),
        el("th", { scope: "row" }, el("a", { href: "/ui/sessions/" + segment(h.session_id) }, h.session_id), ` #${h.position}`),
        el("td", {}, h.agent_id),
        step,
        disp,
        el("td", {}, h.reason_codes.join(", ") || "—"),
        el("td", {}, h.policy_refs.join(", ") || "—"),
        src,
        el("td", { class: "reasoning" }, h.reasoning || "—"),
        bundleCell(h)));
    }
    document.getElementById("entry-hits").hidden = rows.length === 0;
  }
  status(rows.length === 0 ? "Nothing matches this search." : "");
  showNext(page, here, "/ui/search");
}

PAGES.search = searchPage;
