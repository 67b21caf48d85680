// acsledger UI: the what-if page (docs/whatif.md). It starts a run of a
// candidate policy (POST /api/v1/whatif), follows it, and renders its
// report with DOM text nodes only.
"use strict";

const WHATIF_POLL_MS = 500;

async function whatifPage() {
  const params = new URLSearchParams(location.search);
  const requestID = params.get("request_id") || "";
  const sessionID = params.get("session_id") || "";
  const windowDur = params.get("window") || "1h";
  if (requestID) {
    document.getElementById("incident-id").textContent = requestID;
    document.getElementById("incident-window").textContent = windowDur;
    document.getElementById("incident-link").href = `/ui/decisions/${segment(requestID)}?${new URLSearchParams({ session_id: sessionID })}`;
    document.getElementById("incident").hidden = false;
    document.getElementById("filters").hidden = true;
  }
  const select = document.getElementById("recorded");
  try {
    const pol = await getJSON(`${API}/policies`);
    for (const p of pol.policies) {
      select.append(el("option", { value: JSON.stringify({ policy_id: p.policy_id, policy_version: p.policy_version }) }, `${p.policy_id} ${p.policy_version}`));
    }
  } catch (e) {
    whatifStatus(`Could not list the recorded policy versions: ${e.message}`, true);
  }
  const runID = params.get("run");
  if (runID) {
    followRun(runID);
  }
  document.getElementById("whatif-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const form = ev.target;
    const q = new URLSearchParams();
    if (requestID) {
      q.set("request_id", requestID);
      q.set("window", windowDur);
      if (sessionID) {
        q.set("session_id", sessionID);
      }
    } else {
      for (const name of ["since", "until", "agent", "tool", "decision", "source", "limit"]) {
        const v = form.elements[name].value.trim();
        if (v) {
          q.set(name, v);
        }
      }
    }
    q.set("label", document.getElementById("label").value.trim() || "candidate");
    let opts;
    if (form.elements.kind.value === "recorded") {
      opts = { method: "POST", headers: csrfHeaders({ "Content-Type": "application/json" }), body: select.value };
    } else {
      const file = document.getElementById("bundle").files[0];
      if (!file) {
        whatifStatus("Choose a bundle file, or a recorded version.", true);
        return;
      }
      opts = { method: "POST", headers: csrfHeaders({ "Content-Type": "application/gzip" }), body: file };
    }
    whatifStatus("Starting…");
    let r;
    try {
      r = await request(`${API}/whatif?${q}`, opts);
    } catch (e) {
      r = { ok: false, status: 0, body: { error: e.message } };
    }
    if (!r.ok) {
      whatifStatus(`Refused: ${errorOf(r)}`, true);
      return;
    }
    const here = new URLSearchParams(location.search);
    here.set("run", r.body.id);
    history.replaceState(null, "", `${location.pathname}?${here}`);
    followRun(r.body.id);
  });
}

function whatifStatus(msg, isError) {
  const p = document.getElementById("whatif-status");
  p.textContent = msg;
  p.classList.toggle("error", !!isError);
}

async function followRun(id) {
  const cancel = document.getElementById("whatif-cancel");
  cancel.onclick = async () => {
    await request(`${API}/whatif/${segment(id)}/cancel`, { method: "POST", headers: csrfHeaders({}) });
  };
  for (;;) {
    let run;
    try {
      run = await getJSON(`${API}/whatif/${segment(id)}`);
    } catch (e) {
      whatifStatus(`Could not read the run: ${e.message}`, true);
      return;
    }
    const p = run.progress || {};
    if (run.state === "running") {
      cancel.hidden = false;
      whatifStatus(`Running ${run.candidate}: ${p.read || 0} steps read, ${p.evaluated || 0} evaluated, ${p.changed || 0} changed…`);
      await new Promise((res) => setTimeout(res, WHATIF_POLL_MS));
      continue;
    }
    cancel.hidden = true;
    if (run.state !== "done") {
      whatifStatus(`The run ${run.state}${run.error ? ": " + run.error : ""}.`, run.state === "failed");
      return;
    }
    whatifStatus(`Done: ${run.candidate} over ${run.summary.read} steps.`);
    renderReport(run);
    return;
  }
}

function renderReport(run) {
  const sum = run.summary;
  const focus = document.getElementById("focus");
  focus.textContent = "";
  if (sum.focus) {
    const f = sum.focus;
    focus.append(el("p", { id: "focus-verdict", class: f.kind === "unchanged" ? "verdict ok" : "verdict bad" },
      el("strong", {}, f.kind === "unchanged" ? "The candidate decides this step as recorded: " : "The candidate would have decided this step otherwise: "),
      decisionSide(f.recorded), " → ", decisionSide(f.candidate)));
  } else if (run.focus) {
    focus.append(el("p", { id: "focus-verdict", class: "verdict error" }, "The asked step could not be evaluated (see not replayable below)."));
  }
  definitions(document.getElementById("whatif-summary"), [
    ["Candidate", `${sum.candidate} (sha256 ${short(sum.candidate_digest)})`],
    ["Steps read", sum.read],
    ["Evaluated", sum.evaluated],
    ["Unchanged", sum.unchanged],
    ["Changed", el("strong", { id: "changed-count" }, String(sum.changed))],
    ["Not policy decisions", sum.not_policy_decisions],
    ["Not replayable", sum.not_replayable],
    ["Approximate", sum.approximate],
  ].concat(sum.truncated ? [["Stopped", "at the step limit: more steps match"]] : []));
  const chart = document.getElementById("whatif-chart");
  chart.textContent = "";
  chart.append(barChart("Changed decisions per day", (sum.changed_by_day || []).map((d) => ({ day: d.day, values: { changed: d.changed } })), ["changed"]));
  const fill = (id, rows) => {
    const t = document.getElementById(id);
    const tb = t.querySelector("tbody");
    tb.textContent = "";
    for (const r of rows) {
      tb.append(r);
    }
    t.hidden = rows.length === 0;
  };
  fill("whatif-kinds", Object.entries(sum.by_kind || {}).map(([k, n]) => el("tr", {}, el("td", {}, k), el("td", {}, n))));
  fill("whatif-rules", (sum.rules || []).map((r) => el("tr", {}, el("td", {}, el("code", {}, r.rule)), el("td", {}, r.gained), el("td", {}, r.lost))));
  fill("whatif-changes", (run.changes || []).map((c) => {
    const href = `/ui/decisions/${segment(c.step_id)}?${new URLSearchParams({ session_id: c.session_id, whatif: run.id })}`;
    return el("tr", {}, el("td", {}, when(c.recorded_at)), el("td", {}, el("a", { href: "/ui/sessions/" + segment(c.session_id) }, short(c.session_id))),
      el("td", {}, el("a", { class: "whatif-step", href }, `${c.method}${c.tool ? " " + c.tool : ""} #${c.position}`)),
      el("td", {}, decisionSide(c.recorded)), el("td", {}, decisionSide(c.candidate)));
  }));
  fill("whatif-skipped", (sum.not_replayable_steps || []).map((s) => el("tr", {}, el("td", {}, short(s.session_id)), el("td", {}, s.position), el("td", {}, s.reason))));
  document.getElementById("whatif-report").hidden = false;
}

PAGES.whatif = whatifPage;
