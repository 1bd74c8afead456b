// robotmem ui: plain DOM + SVG, no build step, nothing fetched but this server's /api.
"use strict";

const readToken = () => new URLSearchParams(location.hash.slice(1)).get("token");
let token = readToken();
const state = { episodes: [], signature: "", page: { after: null, offset: 0, robot: "" }, pagesBefore: [], selected: new Set(), autoTicked: new Set(), details: new Map(), loading: new Map(), map: null, frame: "", near: null, open: null, view: null, list: null, timeline: null, anchor: null, timelineAsk: null };
const SVG = "http://www.w3.org/2000/svg";
const NO_FRAME = "(no frame)";
const $ = (sel) => document.querySelector(sel);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A 503 (the server is building as many episode pages as it builds at once) is waited out: the
// request is sent again after its Retry-After, a few times, before it counts as failed.
async function api(path) {
  for (let attempt = 0; ; attempt++) {
    const response = await fetch("api" + path, { headers: token ? { Authorization: "Bearer " + token } : {} });
    if (response.status === 503 && attempt < 8) {
      const wait = Number(response.headers.get("Retry-After"));
      await sleep(1000 * (wait > 0 && wait < 60 ? wait : 2));
      continue;
    }
    let body;
    try {
      body = await response.json();
    } catch (error) {
      throw new Error(`${response.status} ${response.statusText}`);
    }
    if (!response.ok) throw new Error((body.error && body.error.message) || response.statusText);
    return body;
  }
}

// User text (a task name, a robot id, a frame) inside a line of other text is isolated: a
// right-to-left override in a task name reversed the session id shown after it.
const BIDI_CONTROLS = /[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/g;
const iso = (text) => "\u2068" + String(text == null ? "" : text).replace(BIDI_CONTROLS, "") + "\u2069";
// User text is shown at most CLIP characters long (the whole in the element's tooltip): a robot id
// of 30,000 characters made the episode's heading and its list row many screens tall.
const CLIP = 120;
const clip = (text) => {
  const s = String(text == null ? "" : text);
  return s.length > CLIP ? s.slice(0, CLIP - 1).replace(/[\ud800-\udbff]$/, "") + "…" : s;  // no half of a pair
};
const userText = (tag, text, attrs = {}) => el(tag, { ...attrs, text: clip(text), ...(String(text == null ? "" : text).length > CLIP ? { title: String(text) } : {}) });

function el(tag, attrs = {}, ...children) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "style") node.style.cssText = value;  // a style attribute is refused by the page's CSP
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

// Every time is UTC, as the CLI shows it: bare in table cells whose heading says (UTC), else labelled.
const fmtTime = (s) => (s == null ? "" : new Date(s * 1000).toISOString().replace("T", " ").slice(0, 19));
const fmtUtc = (s) => (s == null ? "" : fmtTime(s) + " UTC");
const fmtNum = (v, digits = 2) => (v == null ? "" : Number(v).toFixed(digits));
function outcomeClass(row) {
  if (row.success === true || (row.success == null && row.outcome_score != null && row.outcome_score >= 0.5)) return "ok";
  if (row.success === false || (row.outcome_score != null && row.outcome_score < 0.5)) return "fail";
  return "unknown";
}
function outcomeText(row) {
  if (row.outcome_score != null) return fmtNum(row.outcome_score);
  if (row.success != null) return row.success ? "success" : "failure";
  return row.status === "open" ? "open" : "";
}

// ---- episodes -------------------------------------------------------------------------------
// The list comes a page (max_rows) at a time, newest first; "older" asks for the episodes after the
// last row shown (after=, the page's `next`), so a page stays where it is while new episodes start
// (only the newest 500 could be reached before). The poll asks for the page shown.
async function loadEpisodes() {
  const page = state.page;
  let body;
  try {
    const query = new URLSearchParams();
    if (page.after != null) query.set("after", page.after);
    if (page.robot) query.set("robot", page.robot);
    body = await api("/episodes" + (String(query) ? "?" + query : ""));
  } catch (error) {
    if (state.page === page) $("#status").textContent = "cannot read the store: " + error.message;
    return;
  }
  if (state.page !== page) return;  // the person went to another page meanwhile
  const rows = body.episodes;
  state.list = body;
  const openBefore = JSON.stringify(state.episodes.find((r) => r.session_id === state.open));
  const signature = JSON.stringify([body.collection, body.more, page.after, page.robot, rows.map((r) => [r.session_id, r.status, r.facts, r.perceptions, r.outcome_score])]);
  $("#status").textContent = "live, updated " + new Date().toISOString().slice(11, 19) + " UTC";
  if (signature === state.signature) return;
  const known = new Set(state.episodes.map((r) => r.session_id));
  // New episodes among the newest AUTO_TICK are ticked (drawn on the map), the rest only listed.
  // One the page ticked is unticked when it is no longer among them (unless the person ticked it
  // again), and nothing is kept of an episode no longer listed: a page left open while a robot ran
  // 60 episodes drew 66 paths and kept 66 episodes' answers, and over months it kept every one.
  const newest = new Set(page.after == null ? rows.slice(0, AUTO_TICK).map((r) => r.session_id) : []);
  newest.forEach((id) => { if (!known.has(id)) { state.selected.add(id); state.autoTicked.add(id); } });
  state.autoTicked.forEach((id) => { if (!newest.has(id)) { state.autoTicked.delete(id); state.selected.delete(id); } });
  const listed = new Set(rows.map((r) => r.session_id));
  state.selected.forEach((id) => { if (!listed.has(id)) state.selected.delete(id); });
  [...state.details.keys()].forEach((id) => { if (!state.selected.has(id) && id !== state.open) state.details.delete(id); });
  state.episodes = rows;
  state.signature = signature;
  renderEpisodes();
  await refreshMap();
  // the open episode follows its row: a record written into it shows without clicking again
  const openNow = rows.find((r) => r.session_id === state.open);
  if (openNow && JSON.stringify(openNow) !== openBefore) await openEpisode(state.open, { scroll: false });
}

async function turnPage(next) {
  state.page = next;
  state.signature = "";
  $("#episodes-note").textContent = "loading…";
  await loadEpisodes();
}
function olderPage() {
  if (!state.list || state.list.next == null) return;
  state.pagesBefore.push(state.page);
  turnPage({ after: state.list.next, offset: state.page.offset + state.episodes.length, robot: state.page.robot });
}
$("#episodes-older").addEventListener("click", olderPage);
$("#episodes-older-end").addEventListener("click", () => { olderPage(); $("#episodes-panel").scrollIntoView(); });
$("#episodes-newer").addEventListener("click", () => { if (state.pagesBefore.length) turnPage(state.pagesBefore.pop()); });
$("#episodes-newest").addEventListener("click", () => { state.pagesBefore = []; turnPage({ after: null, offset: 0, robot: state.page.robot }); });
// One robot's episodes (its context's robot.id, as written), paged the same way; empty: every robot's.
$("#episodes-filter").addEventListener("submit", (event) => {
  event.preventDefault();
  state.pagesBefore = [];
  turnPage({ after: null, offset: 0, robot: event.target.robot.value });
});

function renderEpisodes() {
  const list = state.list;
  const { offset } = state.page;
  const paged = list.more || offset > 0;
  const whose = state.page.robot ? `robot ${clip(state.page.robot)}'s ` : "";
  $("#episode-count").textContent = `(${paged ? `${count(offset + 1)}–${count(offset + state.episodes.length)}` : state.episodes.length}`
    + `${list.more ? " of more" : ""}) collection ${list.collection}`;
  $("#episodes-note").textContent = paged
    ? `${whose}episodes ${count(offset + 1)} to ${count(offset + state.episodes.length)}, newest first${list.more ? "; older ones on the next pages" : "; the oldest"}`
    : state.episodes.length ? (whose ? `${whose}episodes` : "")
    : whose ? `no episodes of robot ${clip(state.page.robot)} in collection ${list.collection}` : `no episodes in collection ${list.collection} yet`;
  $("#episodes-pages").hidden = !paged;
  $("#episodes-pages-end").hidden = list.next == null;
  $("#episodes-older").disabled = list.next == null;
  $("#episodes-newer").disabled = $("#episodes-newest").disabled = offset === 0;
  const body = $("#episodes tbody");
  body.replaceChildren(...state.episodes.map((row) => {
    const box = el("input", { type: "checkbox", title: "show on the map" });
    box.checked = state.selected.has(row.session_id);
    box.addEventListener("click", (event) => {
      event.stopPropagation();
      state.autoTicked.delete(row.session_id);  // the person's choice stays
      box.checked ? state.selected.add(row.session_id) : state.selected.delete(row.session_id);
      refreshMap();
    });
    return el("tr", { "data-session": row.session_id, class: "episode-row" + (row.session_id === state.open ? " selected" : ""),
      onclick: () => openEpisode(row.session_id) },
      el("td", {}, box), userText("td", row.robot || "", { class: "user-text" }), userText("td", row.task || "", { class: "user-text" }),
      el("td", { text: fmtTime(row.start) }), el("td", { text: row.duration_s == null ? "" : fmtNum(row.duration_s, 1) + " s" }),
      el("td", { class: "outcome-" + outcomeClass(row), text: outcomeText(row) }),
      el("td", { text: row.path_length_m == null ? (row.path_quality || "") : fmtNum(row.path_length_m, 1) + " m" }),
      el("td", { text: `${row.facts} / ${row.perceptions}` }));
  }));
}

// At most one request per episode is in flight: while one runs, every caller (the map, the open
// episode, the next poll) waits for it, even when the episode's row changed meanwhile (a live
// episode's row changes with every record; a long one took seconds to build, and each poll used
// to start another build beside the running ones). The next call after it asks again if the row
// changed.
// Episode requests the page sends at once (the server builds 2 at a time and answers 503 beyond:
// ten ticked episodes asked all at once spent most of their time waiting out Retry-After).
const DETAIL_SLOTS = 2;
let detailsRunning = 0;
const detailQueue = [];
async function inSlot(task) {
  while (detailsRunning >= DETAIL_SLOTS) await new Promise((resolve) => detailQueue.push(resolve));
  detailsRunning++;
  try {
    return await task();
  } finally {
    detailsRunning--;
    const next = detailQueue.shift();
    if (next) next();
  }
}

function detail(id) {
  const running = state.loading.get(id);
  if (running) return running;
  const key = JSON.stringify(state.episodes.find((r) => r.session_id === id));
  const cached = state.details.get(id);
  if (cached && cached.key === key) return Promise.resolve(cached.value);
  const request = inSlot(() => api("/episodes/" + encodeURIComponent(id))).then((value) => {
    state.details.set(id, { key, value });
    return value;
  }).finally(() => state.loading.delete(id));
  state.loading.set(id, request);
  return request;
}

// ---- map ------------------------------------------------------------------------------------
async function refreshMap() {
  try {
    state.map = (await api("/map")).map;
  } catch (error) {
    state.map = null;
  }
  const shown = state.episodes.filter((r) => state.selected.has(r.session_id));
  const details = await Promise.all(shown.map((r) => detail(r.session_id).catch(() => null)));
  const paths = [];
  shown.forEach((row, i) => (details[i] ? details[i].paths : []).forEach((p) => paths.push({ row, ...p })));
  const episodesIn = new Map();
  paths.forEach((p) => episodesIn.set(p.frame || NO_FRAME, (episodesIn.get(p.frame || NO_FRAME) || new Set()).add(p.row.session_id)));
  const counts = new Map([...episodesIn].map(([frame, ids]) => [frame, ids.size]));
  if (state.map && !counts.has(state.map.frame)) counts.set(state.map.frame, 0);
  // the frame with the most episodes first; the map frame wins a tie (it has the picture)
  const frames = [...counts.keys()].sort((a, b) => counts.get(b) - counts.get(a) || (b === "map") - (a === "map"));
  const select = $("#frame");
  if (!frames.includes(state.frame)) state.frame = frames[0] || "";
  // rebuilt only when the list changes: rebuilding closes a list the person has open
  if ([...select.options].map((o) => o.value).join("\n") !== frames.join("\n")) {
    select.replaceChildren(...frames.map((f) => el("option", { value: f, text: clip(f) })));
  }
  select.value = state.frame;
  drawMap(paths.filter((p) => (p.frame || NO_FRAME) === state.frame));
}

function mapImage(spec) {
  const canvas = el("canvas");
  canvas.width = spec.width;
  canvas.height = spec.height;
  const context = canvas.getContext("2d");
  const image = context.createImageData(spec.width, spec.height);
  const grey = atob(spec.pixels_base64);
  for (let i = 0; i < grey.length; i++) {
    const value = grey.charCodeAt(i);
    image.data.set([value, value, value, 255], i * 4);
  }
  context.putImageData(image, 0, 0);
  return canvas.toDataURL();
}

// The view is fitted to where most points are, not to every point: one pose at 1e15 (a bad
// reading) made every other path a dot at 0x0 px. Points further than OUTLIER_SPANS times the
// central spread from its middle are left out of the fit and of the drawing (the path breaks
// there), and their episodes are named under the map.
const OUTLIER_SPANS = 50;
function quantile(sorted, q) {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * (sorted.length - 1)))] : 0;
}
function fitBox(points) {
  if (!points.length) return null;
  const xs = points.map((p) => p[0]).sort((a, b) => a - b), ys = points.map((p) => p[1]).sort((a, b) => a - b);
  const [xl, xh, yl, yh] = [quantile(xs, 0.1), quantile(xs, 0.9), quantile(ys, 0.1), quantile(ys, 0.9)];
  const reach = OUTLIER_SPANS * Math.max(xh - xl, yh - yl, 1);
  const [cx, cy] = [(xl + xh) / 2, (yl + yh) / 2];
  return (x, y) => Math.abs(x - cx) <= reach && Math.abs(y - cy) <= reach;
}
// Per episode, its median point (so an episode far away from the others counts as one vote, not
// as its many points), then the box of the episodes' medians and of all points near them.
function inRange(paths) {
  const medians = [];
  const byEpisode = new Map();
  paths.forEach((p) => byEpisode.set(p.row.session_id, (byEpisode.get(p.row.session_id) || []).concat(p.segments.flat())));
  for (const points of byEpisode.values()) {
    if (!points.length) continue;
    const xs = points.map((p) => p[0]).sort((a, b) => a - b), ys = points.map((p) => p[1]).sort((a, b) => a - b);
    medians.push([quantile(xs, 0.5), quantile(ys, 0.5)]);
  }
  const central = fitBox(medians);
  if (!central) return () => true;
  const near = [...byEpisode.values()].flat().filter(([x, y]) => central(x, y));
  return fitBox(near.length ? near : medians) || central;
}

function drawMap(paths) {
  const svg = $("#map");
  const inside = inRange(paths);
  const outside = new Map();  // session id -> points left out
  paths = paths.map((p) => {
    const segments = [];
    for (const segment of p.segments) {
      let run = [];
      for (const point of segment) {
        if (inside(point[0], point[1])) { run.push(point); continue; }
        outside.set(p.row.session_id, (outside.get(p.row.session_id) || 0) + 1);
        if (run.length) segments.push(run);
        run = [];
      }
      if (run.length) segments.push(run);
    }
    return { ...p, segments };
  });
  const outRows = [...outside.keys()].map((id) => state.episodes.find((r) => r.session_id === id)).filter(Boolean);
  $("#range-note").replaceChildren(...(outRows.length ? [
    `${outRows.length === 1 ? "an episode has" : outRows.length + " episodes have"} points far outside the others, not drawn (the view fits the rest): `,
    ...outRows.flatMap((row, i) => [i ? ", " : "", el("a", { href: "#", class: "out-of-range", "data-session": row.session_id,
      onclick: (e) => { e.preventDefault(); openEpisode(row.session_id); } },
      userText("bdi", `${row.robot || ""} ${row.task || ""}`.trim() || row.session_id),
      ` (${count(outside.get(row.session_id))} points, ${row.session_id})`)])] : []));
  const points = paths.flatMap((p) => p.segments.flat());
  // Paths recorded without a frame name are drawn over the stored map (said under the map).
  const spec = state.map && (state.map.frame === state.frame || state.frame === NO_FRAME) ? state.map : null;
  $("#frame-note").replaceChildren(...(spec && state.frame === NO_FRAME ? ["paths recorded without a frame are drawn over the stored occupancy map (frame ",
    userText("bdi", spec.frame), ", ", userText("bdi", spec.source), ")"] : []));
  let [x0, x1, y0, y1] = [Infinity, -Infinity, Infinity, -Infinity];
  const extend = (x, y) => { x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y); };
  points.forEach(([x, y]) => extend(x, y));
  if (spec) {
    extend(spec.origin[0], spec.origin[1]);
    extend(spec.origin[0] + spec.width * spec.resolution, spec.origin[1] + spec.height * spec.resolution);
  }
  if (state.near) extend(state.near[0], state.near[1]);
  if (!isFinite(x0)) { x0 = -1; x1 = 1; y0 = -1; y1 = 1; }
  const pad = Math.max(x1 - x0, y1 - y0, 1) * 0.05;
  const span = Math.max(x1 - x0, y1 - y0, 1);
  svg.setAttribute("viewBox", `${x0 - pad} ${-y1 - pad} ${x1 - x0 + 2 * pad} ${y1 - y0 + 2 * pad}`);
  const children = [];
  if (spec) {
    children.push(el("svg:image", { class: "occupancy", href: mapImage(spec), x: spec.origin[0],
      y: -(spec.origin[1] + spec.height * spec.resolution), width: spec.width * spec.resolution,
      height: spec.height * spec.resolution, preserveAspectRatio: "none", style: "image-rendering: pixelated" }));
  }
  const byEpisode = new Map();
  paths.forEach((p) => { if (!byEpisode.has(p.row.session_id)) byEpisode.set(p.row.session_id, []); byEpisode.get(p.row.session_id).push(p); });
  const r = span * 0.012;
  for (const [id, episodePaths] of byEpisode) {
    const row = episodePaths[0].row;
    const segments = episodePaths.flatMap((p) => p.segments).filter((s) => s.length);
    if (!segments.length) continue;  // every point out of range (named under the map)
    const d = segments.map((s) => "M" + s.map(([x, y]) => `${x} ${-y}`).join(" L")).join(" ");
    const label = `${iso(clip(row.robot))} ${iso(clip(row.task))} ${fmtUtc(row.start)} (${outcomeText(row) || "no outcome"})`;
    const group = el("svg:g", { class: "episode", "data-session": id });
    group.append(el("svg:path", { class: `episode-path outcome-${outcomeClass(row)}`, d, "data-session": id,
      "data-outside": outside.get(id) || 0,
      "data-segments": segments.length, onclick: (e) => { e.stopPropagation(); openEpisode(id); } }, el("svg:title", { text: label })));
    const first = segments[0][0], lastSegment = segments[segments.length - 1], last = lastSegment[lastSegment.length - 1];
    group.append(el("svg:circle", { class: "start", cx: first[0], cy: -first[1], r, fill: "#fff", stroke: "#000", "vector-effect": "non-scaling-stroke" }));
    group.append(el("svg:rect", { class: "end", x: last[0] - r, y: -last[1] - r, width: 2 * r, height: 2 * r, fill: "#000" }));
    children.push(group);
  }
  if (state.near) {
    children.push(el("svg:circle", { class: "near", cx: state.near[0], cy: -state.near[1], r: r * 1.5, fill: "none", stroke: "#ff6f00", "stroke-width": 2, "vector-effect": "non-scaling-stroke" }));
  }
  svg.replaceChildren(...children);
}

$("#map").addEventListener("click", (event) => {
  const svg = $("#map");
  const point = new DOMPoint(event.clientX, event.clientY).matrixTransform(svg.getScreenCTM().inverse());
  state.near = [point.x, -point.y];
  const form = $("#recall-form");
  form.near.value = `${point.x.toFixed(2)},${(-point.y).toFixed(2)}`;
  refreshMap();
  runRecall();
});
$("#frame").addEventListener("change", (event) => { state.frame = event.target.value; refreshMap(); });

// ---- one episode ------------------------------------------------------------------------------
// Loops, not Math.min(...values): spreading a long series overflows the call stack.
function extent(lists) {
  let low = Infinity, high = -Infinity;
  for (const values of lists) for (const value of values) { if (value < low) low = value; if (value > high) high = value; }
  return [low, high];
}

const count = (n) => n.toLocaleString("en");

function legendText(s) {
  const notes = [];
  if (s.records > 1) notes.push(`${count(s.records)} records`);
  if (s.decimated) notes.push(`${count(s.t.length)} of ${count(s.samples)} samples, decimated`);
  return `${clip(s.name)}${notes.length ? " (" + notes.join("; ") + ")" : ""} `;
}

// omitted: curves the server left out of this chart (it sends at most a few per chart)
function chart(title, series, yLabel, omitted = 0) {
  const width = 460, height = 170, left = 48, bottom = 22, top = 8;
  series = series.filter((s) => s.t.length);
  if (!series.length) return null;
  const [t0, t1] = extent(series.map((s) => s.t));
  const [v0, v1] = extent(series.map((s) => s.v));
  const sx = (t) => left + ((t - t0) / (t1 - t0 || 1)) * (width - left - 8);
  const sy = (v) => height - bottom - ((v - v0) / (v1 - v0 || 1)) * (height - bottom - top);
  const colours = ["#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#5d4037"];
  const decimated = series.some((s) => s.decimated);
  const svg = el("svg:svg", { width, height, class: "chart", "data-series": series.length, "data-decimated": decimated });
  svg.append(el("svg:line", { x1: left, y1: height - bottom, x2: width, y2: height - bottom, stroke: "#999" }));
  svg.append(el("svg:line", { x1: left, y1: top, x2: left, y2: height - bottom, stroke: "#999" }));
  svg.append(el("svg:text", { x: 2, y: top + 10, "font-size": 10, text: fmtNum(v1) }));
  svg.append(el("svg:text", { x: 2, y: height - bottom, "font-size": 10, text: fmtNum(v0) }));
  svg.append(el("svg:text", { x: left, y: height - 6, "font-size": 10, text: "0 s" }));
  svg.append(el("svg:text", { x: width - 50, y: height - 6, "font-size": 10, text: fmtNum(t1 - t0, 1) + " s" }));
  series.forEach((s, i) => {
    const points = s.t.map((t, j) => `${sx(t).toFixed(1)},${sy(s.v[j]).toFixed(1)}`).join(" ");
    svg.append(el("svg:polyline", { points, fill: "none", stroke: colours[i % colours.length], "stroke-width": 1.5 }, el("svg:title", { text: clip(s.name) })));
  });
  const legend = series.map((s, i) => el("span", { style: `color:${colours[i % colours.length]}`, text: legendText(s) }));
  if (omitted) legend.push(el("span", { class: "note", text: `and ${count(omitted)} more curves, not drawn` }));
  return el("div", { class: "plot", "data-plot": title }, el("h4", { text: `${title}${yLabel ? " (" + yLabel + ")" : ""}` }), svg, el("div", { class: "plot-legend" }, ...legend));
}

async function loadThumbnail(box, id) {
  try {
    const image = await api(`/memories/${id}/image`);
    const [h, w, channels] = image.shape;
    const canvas = el("canvas", { title: "memory " + id });
    canvas.width = w; canvas.height = h;
    const context = canvas.getContext("2d");
    const pixels = context.createImageData(w, h);
    const raw = atob(image.base64);
    for (let i = 0; i < w * h; i++) {
      const c = channels || 1;
      const rgb = c >= 3 ? [raw.charCodeAt(i * c), raw.charCodeAt(i * c + 1), raw.charCodeAt(i * c + 2)] : [raw.charCodeAt(i * c), raw.charCodeAt(i * c), raw.charCodeAt(i * c)];
      pixels.data.set([...rgb, 255], i * 4);
    }
    context.putImageData(pixels, 0, 0);
    box.append(canvas);
  } catch (error) { /* a thumbnail that cannot be read is skipped */ }
}

// The box is drawn at once; its images arrive one by one (into the box of this episode only).
function thumbnails(ids, omitted) {
  const title = omitted ? `images (${count(ids.length)} of ${count(ids.length + omitted)} shown)` : `images (${count(ids.length)})`;
  const box = el("div", { class: "plot thumbs", "data-plot": "images" }, el("h4", { text: title }));
  (async () => { for (const id of ids) await loadThumbnail(box, id); })();
  return box;
}

// Nothing of the episode shown before stays on screen while another loads or fails to.
function clearEpisode(title, error = "") {
  $("#episode-title").textContent = title;
  $("#episode-error").textContent = error;
  $("#episode-facts").replaceChildren();
  $("#plots").replaceChildren();
  $("#timeline tbody").replaceChildren();
  $("#timeline-note").textContent = "";
  $("#timeline-more").hidden = true;
  $("#timeline-jump").hidden = true;
  state.timeline = null;
}

// ---- timeline pages ---------------------------------------------------------------------------
// The server sends the timeline 500 lines at a time, read apart from the episode's paths and plots
// (an episode of 100,000 pose chunks took 9 s to build; its lines take a fraction of that). The next
// lines load when the "more" button scrolls into view or is clicked, asked for as the lines after the
// last one shown (after=), not as page N: a record written meanwhile with an earlier time (a late
// camera frame) moved every later line one place on, and page N then repeated a line already shown.
// The person may jump to the start, the end or a time (anchor: the query of the first lines).
const timelineRow = (e) => el("tr", { class: "timeline-" + e.kind + (e.status !== "active" ? " inactive" : ""),
  "data-id": e.id == null ? "" : e.id },
  el("td", { text: fmtTime(e.time) }), el("td", { text: e.kind + (e.status !== "active" ? ` (${e.status})` : "") }),
  userText("td", e.topic || ""), el("td", { class: "content", text: e.content }));

const timelineLines = (id, query) => api(`/episodes/${encodeURIComponent(id)}/timeline${query ? "?" + query : ""}`);
const after = (body) => "after=" + encodeURIComponent(body.timeline_next);

// The lines from the anchor on, at least wanted() of them where there are: a redraw (a record was
// written into the open episode) fetches again as many as the person had loaded, counting lines a
// "more" added while it read (a redraw that counted them when it began drew fewer, and the click's
// lines were gone). `done` gets them in the same turn as that count, before anything else can add.
async function timelineFrom(id, anchor, wanted, done) {
  const bodies = [await timelineLines(id, anchor)];
  let shown = bodies[0].timeline.length;
  while (shown < wanted() && bodies[bodies.length - 1].timeline_next != null) {
    const body = await timelineLines(id, after(bodies[bodies.length - 1]));
    bodies.push(body);
    shown += body.timeline.length;
  }
  done(bodies);
}

function showTimelineState() {
  const t = state.timeline;
  $("#timeline-more").hidden = t.next == null;
  $("#timeline-jump").hidden = false;
  const from = t.first ? `, from line ${count(t.first + 1)}` : "";
  $("#timeline-note").textContent = t.next == null && !t.first ? ""
    : `${count(t.shown)} of ${count(t.total)} lines${from}${t.next == null ? "" : "; more load as you scroll"} ` +
      `(robotmem session show ${t.id} lists them all)`;
}

function renderTimeline(id, anchor, bodies) {
  const lines = bodies.flatMap((body) => body.timeline.map(timelineRow));
  const last = bodies[bodies.length - 1];
  $("#timeline tbody").replaceChildren(...lines);
  state.timeline = { id, anchor, next: last.timeline_next, total: last.timeline_total, first: bodies[0].timeline_first,
    shown: lines.length, loading: false };
  showTimelineState();
}

async function loadMoreTimeline() {
  const t = state.timeline;
  if (!t || t.loading || t.next == null) return;
  t.loading = true;
  let again = false;
  try {
    const body = await timelineLines(t.id, after({ timeline_next: t.next }));
    // A redraw of this episode (a poll: a record was written into it) replaced the lines while
    // these were read. When it ends on the same line, these follow it and join them; when it ends
    // elsewhere (late records moved its last line), joining them would repeat or skip lines, so
    // the lines after its own last one are asked for instead: the click is not lost either way.
    const now = state.timeline;
    const redrawn = now !== t && now && now.id === t.id && now.anchor === t.anchor && !now.loading;
    if (now !== t && !(redrawn && now.next === t.next)) {
      again = Boolean(redrawn);
      return;
    }
    $("#timeline tbody").append(...body.timeline.map(timelineRow));
    Object.assign(now, { next: body.timeline_next, total: body.timeline_total, shown: now.shown + body.timeline.length });
    showTimelineState();
  } catch (error) {
    if (state.timeline === t) $("#timeline-note").textContent = "cannot load more lines: " + error.message;
  } finally {
    t.loading = false;
    if (again) loadMoreTimeline();
  }
}
$("#timeline-more").addEventListener("click", loadMoreTimeline);
new IntersectionObserver((seen) => { if (seen.some((e) => e.isIntersecting)) loadMoreTimeline(); }).observe($("#timeline-more"));

// Jumps replace the lines shown with the 500 from the start, from a time, or the last 500. The
// anchor is kept at once: a redraw that starts before the jump's lines come reads from it too.
// Only the latest request for a timeline's first lines is drawn (a redraw begun before a jump
// and answered after it drew the start over the lines jumped to).
function askTimeline(id, query, lines, still = () => true) {
  const ask = {};
  state.timelineAsk = ask;
  const wanted = () => {
    const t = state.timeline;
    return Math.max(lines, t && t.id === id && t.anchor === query ? t.shown : 0);
  };
  return timelineFrom(id, query, wanted, (bodies) => {
    if (state.timelineAsk === ask && state.open === id && still()) renderTimeline(id, query, bodies);
  });
}

async function jumpTimeline(query) {
  const id = state.open;
  if (!id) return;
  state.anchor = { id, query };
  $("#timeline-note").textContent = "loading…";
  try {
    await askTimeline(id, query, 0);
  } catch (error) {
    if (state.open === id) $("#timeline-note").textContent = "cannot show these lines: " + error.message;
  }
}
$("#timeline-start").addEventListener("click", () => jumpTimeline(""));
$("#timeline-end").addEventListener("click", () => jumpTimeline("at=end"));
$("#timeline-jump").addEventListener("submit", (event) => {
  event.preventDefault();
  const at = event.target.at.value.trim();
  jumpTimeline(at ? "at=" + encodeURIComponent(at) : "");
});

function renderEpisode(id, data) {
  const row = data.episode;
  const gaps = data.gaps.map((g) => `${fmtTime(g.start)} – ${fmtUtc(g.end)}${g.topic ? " " + iso(clip(g.topic)) : ""} (${iso(clip(g.reason || "gap"))})`).join("; ");
  const facts = el("p", { class: "user-text", text:
    `start ${fmtUtc(row.start)}, ${row.duration_s == null ? "open" : fmtNum(row.duration_s, 1) + " s"}, outcome ${outcomeText(row) || "none"}, ` +
    `path ${row.path_length_m == null ? (row.path_quality || "none") : fmtNum(row.path_length_m, 2) + " m (" + row.path_quality + ")"}, ` +
    `${row.facts} facts, ${row.perceptions} perceptions${gaps ? ", gaps: " + gaps : ""}` });
  const plots = [
    chart("joint positions", data.series.joints, "rad", data.series.omitted.joints),
    chart("forces", data.series.forces, "", data.series.omitted.forces),
    chart("laser scan", data.series.scans, "m"),
    data.series.images.length ? thumbnails(data.series.images, data.series.omitted.images) : null,
  ];
  // everything is built before anything is replaced: a failure above leaves the cleared panel
  $("#episode-title").replaceChildren(userText("bdi", row.robot || ""), " ", userText("bdi", row.task || ""), " — ",
    el("bdi", { text: id }));
  $("#episode-facts").replaceChildren(facts);
  $("#plots").replaceChildren(...plots.filter(Boolean));
}

// The timeline and the rest of the episode are asked for at once and each drawn when it comes;
// `view` is this call's: a later call (another episode, or a redraw) or a failure drops what is late.
async function openEpisode(id, { scroll = true } = {}) {
  state.open = id;
  const view = {};
  state.view = view;
  const current = () => state.view === view && state.open === id && !view.failed;
  document.querySelectorAll("#episodes tr").forEach((tr) => tr.classList.toggle("selected", tr.dataset.session === id));
  document.querySelectorAll(".episode-path").forEach((p) => p.classList.toggle("highlight", p.dataset.session === id));
  const panel = $("#episode-panel");
  if (panel.dataset.session !== id) clearEpisode(`${id} (loading…)`);
  panel.hidden = false;
  panel.dataset.session = id;
  const fail = (error) => {
    if (!current()) return;
    view.failed = true;
    clearEpisode(id, "cannot show this episode: " + error.message);
  };
  if (!state.anchor || state.anchor.id !== id) state.anchor = { id, query: "" };
  const anchor = state.anchor.query;
  const t = state.timeline && state.timeline.id === id && state.timeline.anchor === anchor ? state.timeline : null;
  const lines = askTimeline(id, anchor, t ? t.shown : 0, current).catch(fail);
  const rest = detail(id).then((data) => {
    if (!current()) return;
    try {
      renderEpisode(id, data);
      $("#episode-error").textContent = "";
    } catch (error) {
      fail(error);
    }
  }, fail);
  if (scroll) panel.scrollIntoView({ behavior: "smooth", block: "start" });
  await Promise.all([lines, rest]);
}

// ---- recall -----------------------------------------------------------------------------------
async function runRecall(event) {
  if (event) event.preventDefault();
  const form = $("#recall-form");
  const params = new URLSearchParams();
  for (const name of ["q", "filter", "near", "since", "until", "n", "min_relevance"]) if (form[name].value) params.set(name, form[name].value);
  $("#recall-error").textContent = "";
  $("#recall-note").textContent = "";
  let body;
  try {
    body = await api("/recall?" + params);
  } catch (error) {
    $("#recall-error").textContent = error.message;
    $("#recall-results tbody").replaceChildren();
    return;
  }
  $("#recall-note").textContent = body.results.length ? "" : "no results";
  $("#recall-results tbody").replaceChildren(...body.results.map((hit, i) => el("tr", { class: "hit", "data-id": hit.id },
    el("td", { text: i + 1 }), el("td", { class: "content", text: hit.content }),
    el("td", { class: "relevance", text: fmtNum(hit.relevance) }), el("td", { text: fmtNum(hit.similarity) }),
    el("td", { text: hit.distance == null ? "" : fmtNum(hit.distance) + " m" }),
    el("td", {}, hit.session_id ? el("a", { href: "#", class: "episode-link", text: hit.session_id, onclick: (e) => { e.preventDefault(); openEpisode(hit.session_id); } }) : ""),
    el("td", {}, el("code", { text: JSON.stringify({ robot: hit.robot, task: hit.task, params: hit.params }).slice(0, 160) })))));
}
$("#recall-form").addEventListener("submit", runRecall);

// A token added to the address after the page loaded (#token=...) is used at once, without a reload.
window.addEventListener("hashchange", () => {
  if (readToken() === token) return;
  token = readToken();
  state.signature = "";
  state.details.clear();
  loadEpisodes();
});

// One poll at a time: the next is scheduled when this one has finished (with the map and the
// open episode it redraws), POLL_MS later, or longer when it was slow (twice its time, up to
// POLL_MAX_MS): a long live episode took seconds to build, and a timer firing every 3 s
// regardless stacked a dozen builds on the server.
const POLL_MS = 3000, POLL_MAX_MS = 30000;
const AUTO_TICK = 10;
async function poll() {
  const started = performance.now();
  try {
    await loadEpisodes();
  } finally {
    const took = performance.now() - started;
    setTimeout(poll, Math.min(POLL_MAX_MS, Math.max(POLL_MS, 2 * took)));
  }
}
poll();
