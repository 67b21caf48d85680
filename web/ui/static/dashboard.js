// acsledger UI: the dashboard's charts and tiles (GET /api/v1/stats),
// drawn as hand-written SVG (charts.js).
"use strict";

const DISPOSITIONS = ["allow", "deny", "modify", "ask", "defer", "none"];

// age says how long ago t was, in the largest whole unit.
function age(t, now) {
  const s = Math.max(0, Math.round((now - t) / 1000));
  if (s < 120) {
    return `${s} s`;
  }
  if (s < 7200) {
    return `${Math.round(s / 60)} min`;
  }
  if (s < 172800) {
    return `${Math.round(s / 3600)} h`;
  }
  return `${Math.round(s / 86400)} days`;
}

function tile(id, label, value, note, cls) {
  return el("div", { class: "tile " + (cls || ""), id }, el("span", { class: "label" }, label), el("span", { class: "big" }, value), note ? el("span", { class: "help" }, note) : "");
}

async function dashboardCharts() {
  const glance = document.getElementById("glance");
  let st;
  try {
    st = await getJSON(`${API}/stats`);
  } catch (e) {
    glance.textContent = `Could not read the figures: ${e.message}`;
    return;
  }
  const now = new Date(st.now).getTime();
  if (st.checkpoint) {
    glance.append(tile("tile-checkpoint", "Latest checkpoint", `size ${st.checkpoint.size.toLocaleString("en")}`, `signed ${age(new Date(st.checkpoint.at).getTime(), now)} ago`));
  } else {
    glance.append(tile("tile-checkpoint", "Latest checkpoint", "none", "nothing anchored yet", "warn"));
  }
  // How far the published checkpoint trails the integrated tree: with a
  // witness policy (serve --witness-policy) a checkpoint is published only
  // once enough witnesses cosigned it.
  const pub = st.publication;
  if (pub) {
    const held = pub.witness_policy ? "held by the witness policy" : "published as signed";
    glance.append(tile("tile-publication", "Published checkpoint lag",
      pub.lag_leaves === 0 ? "up to date" : `${pub.lag_leaves.toLocaleString("en")} leaves`,
      `published ${pub.published.toLocaleString("en")}, signed ${pub.signed.toLocaleString("en")}, integrated ${pub.integrated.toLocaleString("en")}; ${held}`,
      pub.witness_policy && pub.published < pub.signed ? "warn" : ""));
  }
  const lr = st.last_reverify;
  if (lr && lr.finished) {
    const bad = lr.failed > 0 || lr.error;
    glance.append(tile("tile-reverify", "Last re-verification", bad ? `${lr.failed} failed` : "✓ all verified",
      `${lr.sessions} sessions, ${age(new Date(lr.finished).getTime(), now)} ago`, bad ? "bad" : "ok"));
  } else {
    glance.append(tile("tile-reverify", "Last re-verification", "never", "since this server started", "warn"));
  }
  // The quarantine exists once ingest's migration has run; until then the
  // tile is left out rather than showing a zero that means nothing.
  if (st.quarantined !== null) {
    glance.append(tile("tile-quarantine", "Quarantined ingest records", st.quarantined === 0 ? "none" : st.quarantined.toLocaleString("en"), "", st.quarantined > 0 ? "warn" : ""));
  }
  // With a read replica (serve --db-read) the compliance reads may trail
  // the primary: say by how much, and which store answers them (the
  // primary while the replica is unreachable or staler than
  // --db-read-max-lag).
  const rr = st.read_replica;
  if (rr) {
    const why = {
      within_max_lag: rr.max_lag_seconds > 0 ? `within the ${rr.max_lag_seconds} s limit` : "no lag limit",
      promoted: "promoted, no longer a standby",
      over_max_lag: `staler than the ${rr.max_lag_seconds} s limit`,
      unreachable: "replica unreachable",
    }[rr.reads_reason] || rr.reads_reason;
    const reads = `Reads from the ${rr.reads_from}: ${why}`;
    let value = "caught up";
    let note = reads;
    if (rr.problem) {
      value = "unknown";
    } else if (rr.lag_bytes > 0) {
      value = `${rr.stale_seconds.toFixed(1)} s`;
      note = `${Math.ceil(rr.lag_bytes / 1024).toLocaleString("en")} KiB of WAL behind. ${reads}`;
    }
    glance.append(tile("tile-replica", "Read replica lag", value, note, rr.reads_from !== "replica" || rr.stale_seconds > 10 ? "warn" : ""));
  }
  await retentionTiles(glance, now);
  // One tile per push sink (serve --export, GET /api/v1/exports): how far
  // it trails the ledger, what the receiver confirmed (the API's words:
  // acknowledged, sent_unconfirmed, resent; docs/export.md "Counters")
  // and whether its last attempt failed.
  try {
    const ex = await getJSON(`${API}/exports`);
    for (const sk of ex.sinks.filter((x) => x.configured)) {
      const n = (x) => x.toLocaleString("en");
      const value = sk.entries_behind === 0 ? "caught up" : `${n(sk.entries_behind)} behind`;
      let note = sk.delivery === "sent_unconfirmed"
        ? `${n(sk.sent_unconfirmed)} sent_unconfirmed (plain TCP: never confirmed), ${n(sk.resend_window)} in the resend window`
        : `${n(sk.acknowledged)} acknowledged`;
      if (sk.seconds_behind > 0) {
        note = `${sk.seconds_behind.toFixed(1)} s behind; ${note}`;
      }
      if (sk.resent > 0) {
        note += `, ${n(sk.resent)} resent`;
      }
      if (sk.failing) {
        note += `. Failing: ${sk.last_error}`;
      }
      glance.append(tile(`tile-export-${sk.name}`, `Export ${sk.name}`, value, note, sk.failing ? "bad" : sk.seconds_behind > 60 ? "warn" : "ok"));
    }
  } catch (e) {
    // A server without export answers 501: no tile.
  }
  // Every day of the window gets a slot, so a quiet day shows as a gap.
  const byDay = new Map(st.days.map((d) => [d.day, d]));
  const last = new Date(st.now);
  const slots = [];
  for (let i = 29; i >= 0; i--) {
    const day = new Date(Date.UTC(last.getUTCFullYear(), last.getUTCMonth(), last.getUTCDate() - i)).toISOString().slice(0, 10);
    slots.push(byDay.get(day) || { day, entries: 0, sessions: 0, decisions: {} });
  }
  const days = slots.map((d) => ({ day: d.day, values: { entries: d.entries, sessions: d.sessions } }));
  const vol = document.getElementById("volume-chart");
  vol.append(barChart("Entries per day", days.map((d) => ({ day: d.day, values: { entries: d.values.entries } })), ["entries"]),
    barChart("Sessions per day", days.map((d) => ({ day: d.day, values: { sessions: d.values.sessions } })), ["sessions"]));
  const mix = days.map((d) => {
    const v = {};
    for (const [k, n] of Object.entries(byDay.has(d.day) ? byDay.get(d.day).decisions : {})) {
      const key = DISPOSITIONS.includes(k.toLowerCase()) ? k.toLowerCase() : "none";
      v[key] = (v[key] || 0) + n;
    }
    return { day: d.day, values: v };
  });
  document.getElementById("decision-chart").append(barChart("Decisions per day", mix, DISPOSITIONS), legend(DISPOSITIONS));
}

// retentionTiles adds the retention figures (GET /api/v1/admin/retention):
// when the next payload expires, what sweeps and erasure requests erased,
// and the standing legal holds.
async function retentionTiles(glance, now) {
  let rt;
  try {
    rt = await getJSON(`${API}/admin/retention`);
  } catch (e) {
    glance.append(tile("tile-retention", "Retention", "unknown", e.message, "warn"));
    return;
  }
  if (rt.rules.length === 0) {
    glance.append(tile("tile-retention", "Next expiry", "no rule", "payloads are kept until erased by hand", ""));
  } else if (rt.next_expiry) {
    const t = new Date(rt.next_expiry).getTime();
    glance.append(tile("tile-retention", "Next expiry", t <= now ? "due" : `in ${age(now, t)}`,
      `${rt.rules.length} rule${rt.rules.length === 1 ? "" : "s"}; next sweep ${rt.next_sweep ? new Date(rt.next_sweep).toISOString() : "by cron (acsledger retention sweep)"}`, t <= now ? "warn" : ""));
  } else {
    glance.append(tile("tile-retention", "Next expiry", "nothing stored", `${rt.rules.length} rule${rt.rules.length === 1 ? "" : "s"}, no payload in scope`, ""));
  }
  glance.append(tile("tile-erased", "Payloads erased", (rt.erased_by_sweeps + rt.erased_by_requests).toLocaleString("en"),
    `${rt.erased_by_sweeps.toLocaleString("en")} by sweeps, ${rt.erased_by_requests.toLocaleString("en")} by erasure requests${rt.last_sweep ? "; last sweep " + age(new Date(rt.last_sweep).getTime(), now) + " ago" : ""}`, ""));
  const holds = tile("tile-holds", "Legal holds", rt.standing_holds === 0 ? "none" : rt.standing_holds.toLocaleString("en"), "", rt.standing_holds > 0 ? "warn" : "");
  holds.append(el("a", { href: "/ui/holds" }, "list"));
  glance.append(holds);
}
