// acsledger UI: the legal holds (GET /api/v1/admin/holds), admins only.
"use strict";

function holdScope(s) {
  const parts = [];
  if (s.sessions && s.sessions.length) {
    parts.push(`${s.sessions.length} session${s.sessions.length === 1 ? "" : "s"}: ${s.sessions.slice(0, 5).join(", ")}${s.sessions.length > 5 ? ", …" : ""}`);
  }
  if (s.agent_prefix) {
    parts.push(`agents ${s.agent_prefix}*`);
  }
  if (s.from || s.until) {
    parts.push(`recorded ${s.from ? "from " + s.from : ""}${s.from && s.until ? " " : ""}${s.until ? "until " + s.until : ""}`);
  }
  return parts.join("; ");
}

async function holdsList() {
  const status = document.getElementById("holds-status");
  const table = document.getElementById("holds");
  const body = table.querySelector("tbody");
  const all = document.getElementById("all").checked;
  body.replaceChildren();
  let list;
  try {
    list = (await getJSON(`${API}/admin/holds${all ? "?all=true" : ""}`)).holds;
  } catch (e) {
    status.textContent = `Could not read the holds: ${e.message}`;
    table.hidden = true;
    return;
  }
  status.textContent = list.length === 0 ? (all ? "No hold was ever set." : "No hold stands.") : `${list.length} hold${list.length === 1 ? "" : "s"}`;
  for (const h of list) {
    body.append(el("tr", {},
      el("td", {}, h.case),
      el("td", {}, holdScope(h.scope)),
      el("td", {}, h.set_by || "—"),
      el("td", {}, h.set_at || "—"),
      el("td", {}, h.reason),
      el("td", {}, h.released_at ? `${h.released_at} by ${h.released_by || "?"}: ${h.release_reason || ""}` : "standing")));
  }
  table.hidden = list.length === 0;
}

PAGES.holds = () => {
  document.getElementById("all").addEventListener("change", holdsList);
  holdsList();
};
