// acsledger UI charts: hand-written SVG, built with DOM calls (no markup
// strings, no library, no build step). Each chart has a <title> and a
// text summary for screen readers, and scales to its box.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function svgEl(tag, attrs, ...children) {
  const n = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    n.setAttribute(k, String(v));
  }
  for (const c of children) {
    n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return n;
}

const CHART_W = 640;
const CHART_H = 220;
const PAD = { l: 56, r: 12, t: 12, b: 34 };

// niceMax rounds a maximum up to 1, 2 or 5 times a power of ten.
function niceMax(v) {
  if (v <= 0) {
    return 1;
  }
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) {
    if (v <= m * p) {
      return m * p;
    }
  }
  return 10 * p;
}

// axisMax is a nice maximum that four gridlines divide into integers.
function axisMax(v) {
  return Math.max(4, Math.ceil(niceMax(v) / 4) * 4);
}

function frame(title, yMax, xLabels) {
  const svg = svgEl("svg", { viewBox: `0 0 ${CHART_W} ${CHART_H}`, class: "chart", role: "img" }, svgEl("title", {}, title));
  const ih = CHART_H - PAD.t - PAD.b;
  for (let i = 0; i <= 4; i++) {
    const y = PAD.t + ih - (ih * i) / 4;
    svg.append(svgEl("line", { x1: PAD.l, x2: CHART_W - PAD.r, y1: y, y2: y, class: "grid" }),
      svgEl("text", { x: PAD.l - 6, y: y + 4, class: "axis", "text-anchor": "end" }, Math.round((yMax * i) / 4).toLocaleString("en")));
  }
  for (const [x, label, anchor] of xLabels) {
    svg.append(svgEl("text", { x, y: CHART_H - 10, class: "axis", "text-anchor": anchor || "middle" }, label));
  }
  return svg;
}

// lineChart draws points [{x: Date, y: number}] as a step line: a tree
// size holds until the next checkpoint.
function lineChart(title, points) {
  const iw = CHART_W - PAD.l - PAD.r;
  const ih = CHART_H - PAD.t - PAD.b;
  if (points.length === 0) {
    return el("p", { class: "help" }, `${title}: no data yet.`);
  }
  const x0 = points[0].x.getTime();
  const x1 = Math.max(points[points.length - 1].x.getTime(), x0 + 1);
  const yMax = axisMax(Math.max(...points.map((p) => p.y)));
  const px = (t) => PAD.l + ((t - x0) / (x1 - x0)) * iw;
  const py = (v) => PAD.t + ih - (v / yMax) * ih;
  const labels = [[px(x0), shortDate(points[0].x), "start"]];
  if (points.length > 1) {
    labels.push([px(x1), shortDate(points[points.length - 1].x), "end"]);
  }
  const svg = frame(title, yMax, labels);
  let d = `M${px(points[0].x.getTime()).toFixed(1)},${py(points[0].y).toFixed(1)}`;
  for (const p of points.slice(1)) {
    d += ` H${px(p.x.getTime()).toFixed(1)} V${py(p.y).toFixed(1)}`;
  }
  svg.append(svgEl("path", { d, class: "line" }));
  for (const p of points) {
    svg.append(svgEl("circle", { cx: px(p.x.getTime()).toFixed(1), cy: py(p.y).toFixed(1), r: 2.5, class: "dot" },
      svgEl("title", {}, `${p.y.toLocaleString("en")} at ${when(p.x.toISOString())}`)));
  }
  return svg;
}

// barChart draws one stacked bar per day: days [{day, values: {key: n}}],
// keys in stacking order.
function barChart(title, days, keys) {
  const iw = CHART_W - PAD.l - PAD.r;
  const ih = CHART_H - PAD.t - PAD.b;
  if (days.length === 0) {
    return el("p", { class: "help" }, `${title}: no data yet.`);
  }
  const totals = days.map((d) => keys.reduce((s, k) => s + (d.values[k] || 0), 0));
  const yMax = axisMax(Math.max(...totals));
  const slot = iw / days.length;
  const bw = Math.max(2, Math.min(40, slot * 0.7));
  const labels = [[PAD.l + slot / 2, days[0].day.slice(5)]];
  if (days.length > 1) {
    labels.push([PAD.l + slot * (days.length - 0.5), days[days.length - 1].day.slice(5)]);
  }
  const svg = frame(title, yMax, labels);
  days.forEach((d, i) => {
    let y = PAD.t + ih;
    const x = PAD.l + slot * i + (slot - bw) / 2;
    for (const k of keys) {
      const v = d.values[k] || 0;
      if (v === 0) {
        continue;
      }
      const h = (v / yMax) * ih;
      y -= h;
      svg.append(svgEl("rect", { x: x.toFixed(1), y: y.toFixed(1), width: bw.toFixed(1), height: h.toFixed(1), class: "bar bar-" + k.replace(/[^a-z_]/g, "") },
        svgEl("title", {}, `${d.day}: ${v.toLocaleString("en")} ${k}`)));
    }
  });
  return svg;
}

function legend(keys) {
  return el("p", { class: "legend" }, ...keys.flatMap((k) => [el("span", { class: "swatch bar-" + k.replace(/[^a-z_]/g, "") }), ` ${k} `]));
}

function shortDate(d) {
  return d.toISOString().slice(0, 16).replace("T", " ");
}
