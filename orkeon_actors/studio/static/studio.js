// orkeon Studio: the page. No framework, no network beyond this Studio's own routes:
// /api/state is polled every second, /api/events pushes the message flow (server-sent events).
"use strict";

const TOKEN = new URLSearchParams(location.search).get("token") || "";
const SVG = "http://www.w3.org/2000/svg";
const MAX_EVENTS = 300;
const ROW = 22;
const LANE_W = 130;
const TOP = 34;

const ui = {
  paused: false,
  held: [],
  events: [],
  lanes: [],
  state: null,
  offsetMs: 0,
  selected: null,
  counts: { publish: 0, post: 0, send: 0, reply: 0, receive: 0, timeout: 0, acl_refused: 0 },
  series: { messages: [], timeouts: [], latency: [], asleep: [], waits: [], refusals: [] },
  latencies: [],
};

function $(id) { return document.getElementById(id); }
function api(path) { return path + (path.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(TOKEN); }
function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// -- filters -----------------------------------------------------------------------------

function matches(ev) {
  const crew = $("filter-crew").value.trim();
  const topic = $("filter-topic").value.trim();
  if (crew && !String(ev.crew || "").includes(crew) && !String(ev.to_crew || "").includes(crew)
      && !String(ev.to || "").includes(crew)) return false;
  if (topic && !String(ev.topic || ev.waited_for || "").includes(topic)) return false;
  return true;
}

// -- the message flow as a sequence diagram ----------------------------------------------

function laneOf(address) {
  if (!address) return null;
  const m = /^(agent|crew|client|topic):\/\/(.*)$/.exec(address);
  if (!m) return address;
  if (m[1] === "agent" || m[1] === "crew") return m[2];
  return m[1] + ":" + m[2];
}
function sourceLane(ev) {
  if (ev.kind === "receive") return laneOf(ev.to) || ev.to_crew || "topics";
  if (ev.agent) return ev.crew + "/" + ev.agent;
  return ev.crew || "hub";
}
function targetLane(ev) {
  if (["publish"].includes(ev.kind)) return ev.to_crew ? ev.to_crew : "topics";
  if (ev.kind === "reply" && ev.to_agent && ev.to_crew) return ev.to_crew + "/" + ev.to_agent;  // the requester
  if (["post", "send", "reply", "acl_refused"].includes(ev.kind)) return laneOf(ev.to) || ev.to_crew || "topics";
  return null;
}
function laneIndex(key) {
  let i = ui.lanes.indexOf(key);
  if (i < 0) { ui.lanes.push(key); i = ui.lanes.length - 1; }
  return i;
}
// Internal topics (the hub's own, such as _system.post for a post) are not shown in labels.
function shownTopic(topic) { return topic && !topic.startsWith("_system.") ? topic : ""; }
function label(ev) {
  const topic = shownTopic(ev.topic);
  switch (ev.kind) {
    case "timeout": return "timeout: " + (ev.waited_for || "");
    case "wake": case "sleep": case "state": return ev.kind + " " + (ev.from_state || "-") + " \u2192 " + ev.to_state;
    case "acl_refused": return "ACL refused (" + (ev.rule || "") + ")";
    case "receive": return "received" + (topic ? " " + topic : "") + (ev.latency_ms !== undefined ? " (" + ev.latency_ms + " ms)" : "");
    default: return ev.kind + (topic ? " " + topic : "");
  }
}

function renderFlow() {
  const shown = ui.events.filter(matches);
  const root = $("flow");
  root.replaceChildren();
  ui.lanes = [];
  for (const ev of shown) { laneIndex(sourceLane(ev)); const t = targetLane(ev); if (t) laneIndex(t); }
  const width = Math.max(800, ui.lanes.length * LANE_W + 40);
  const height = TOP + shown.length * ROW + 10;
  root.setAttribute("width", width);
  root.setAttribute("height", height);
  const defs = svg("defs");
  for (const kind of Object.keys(ui.counts).concat(["wake", "sleep", "state"])) {
    const marker = svg("marker", { id: "head-" + kind, viewBox: "0 0 10 10", refX: 9, refY: 5,
      markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse", class: "kind-" + kind });
    marker.appendChild(svg("path", { d: "M 0 0 L 10 5 L 0 10 z" }));
    defs.appendChild(marker);
  }
  root.appendChild(defs);
  ui.lanes.forEach((key, i) => {
    const x = 20 + i * LANE_W + LANE_W / 2;
    const lane = svg("g", { class: "lane-group", "data-lane": key });
    lane.appendChild(svg("text", { x, y: 14, "text-anchor": "middle", class: "lane-label" }, key));
    lane.appendChild(svg("line", { x1: x, y1: 20, x2: x, y2: height, class: "lane" }));
    root.appendChild(lane);
  });
  shown.forEach((ev, row) => {
    const y = TOP + row * ROW + ROW / 2;
    const from = 20 + laneIndex(sourceLane(ev)) * LANE_W + LANE_W / 2;
    const target = targetLane(ev);
    const g = svg("g", { class: "event kind-" + ev.kind, "data-kind": ev.kind, "data-crew": ev.crew || "",
      "data-topic": ev.topic || "" });
    g.appendChild(svg("title", {}, JSON.stringify(ev, null, 1)));
    if (target !== null && target !== sourceLane(ev)) {
      const to = 20 + laneIndex(target) * LANE_W + LANE_W / 2;
      g.appendChild(svg("line", { x1: from, y1: y, x2: to, y2: y, class: "arrow kind-" + ev.kind,
        "marker-end": "url(#head-" + ev.kind + ")", "stroke-dasharray": ev.kind === "acl_refused" ? "4 3" : "" }));
      g.appendChild(svg("text", { x: (from + to) / 2, y: y - 4, "text-anchor": "middle" }, label(ev)));
    } else if (["wake", "sleep", "state", "timeout"].includes(ev.kind)) {
      g.appendChild(svg("rect", { x: from - 6, y: y - 8, width: 12, height: 16, rx: 2 }));
      g.appendChild(svg("text", { x: from + 10, y: y + 4 }, label(ev)));
    } else {
      g.appendChild(svg("circle", { cx: from, cy: y, r: 4 }));
      g.appendChild(svg("text", { x: from + 8, y: y + 4 }, label(ev)));
    }
    g.appendChild(svg("text", { x: 2, y: y + 4, class: "muted", "font-size": 9 }, (ev.at || "").slice(11, 23)));
    root.appendChild(g);
  });
  $("flow-count").textContent = shown.length + " shown of " + ui.events.length
    + (ui.paused ? " \u2014 paused, " + ui.held.length + " new" : "");
}

// Events are drawn in the order things happened (their "at"), not the order they arrived: a
// post is stamped when it was posted, and its receipt may reach the page first. At the same
// instant, a consumption (receive, timeout) comes after what it consumed.
function happenedBefore(a, b) {
  if (a.at !== b.at) return a.at < b.at;
  const rank = (ev) => (ev.kind === "receive" || ev.kind === "timeout" ? 1 : 0);
  return rank(a) < rank(b);
}
function insertInOrder(list, ev) {
  let i = list.length;
  while (i > 0 && happenedBefore(ev, list[i - 1])) i -= 1;
  list.splice(i, 0, ev);
}
function onEvent(ev) {
  if (ev.kind in ui.counts) ui.counts[ev.kind] += 1;
  if (ev.kind === "receive" && ev.latency_ms !== undefined) ui.latencies.push(ev.latency_ms);
  if (ui.paused) { ui.held.push(ev); $("flow-count").textContent = ui.held.length + " new while paused"; return; }
  insertInOrder(ui.events, ev);
  if (ui.events.length > MAX_EVENTS) ui.events.splice(0, ui.events.length - MAX_EVENTS);
  scheduleFlow();
}
let flowPending = false;
function scheduleFlow() {
  if (flowPending) return;
  flowPending = true;
  requestAnimationFrame(() => { flowPending = false; renderFlow(); });
}

// -- crews, waits, snapshot, ACL, metrics -------------------------------------------------

function renderCrews(state) {
  const body = $("crews").tBodies[0];
  body.replaceChildren();
  for (const crew of state.crews) {
    if ($("filter-crew").value.trim() && !crew.id.includes($("filter-crew").value.trim())) continue;
    const tr = el("tr", { "data-crew": crew.id });
    tr.appendChild(el("td", {}, crew.id));
    tr.appendChild(el("td", {}, crew.name || ""));
    const td = el("td");
    td.appendChild(el("span", { class: "state state-" + crew.state }, crew.state));
    tr.appendChild(td);
    tr.appendChild(el("td", {}, crew.mode || ""));
    tr.appendChild(el("td", {}, (crew.agents || []).join(", ")));
    tr.appendChild(el("td", { class: "as-of", "data-as-of": crew.as_of || "" }, crew.as_of ? "" : "live"));
    tr.addEventListener("click", () => showSnapshot(crew.id));
    body.appendChild(tr);
  }
}

function renderWaits(state) {
  const body = $("waits").tBodies[0];
  body.replaceChildren();
  for (const wait of state.waits) {
    if ($("filter-crew").value.trim() && !wait.crew.includes($("filter-crew").value.trim())) continue;
    const tr = el("tr", { "data-wait": wait.wait_id, "data-crew": wait.crew });
    tr.appendChild(el("td", {}, wait.crew));
    tr.appendChild(el("td", {}, wait.agent || (wait.asleep ? "(asleep)" : "")));
    tr.appendChild(el("td", {}, wait.kind));
    tr.appendChild(el("td", {}, wait.target));
    tr.appendChild(el("td", { class: "countdown", "data-expires": wait.expires_at || "" }, wait.expires_at ? "" : "forever"));
    body.appendChild(tr);
  }
  tickCountdowns();
}
// How old each stored state is: a store holds what the runtime last committed, not the live state.
function age(seconds) {
  if (seconds < 90) return Math.max(0, Math.round(seconds)) + " s ago";
  if (seconds < 5400) return Math.round(seconds / 60) + " min ago";
  return Math.round(seconds / 3600) + " h ago";
}
function renderMailboxes(state) {
  const body = $("mailboxes").tBodies[0];
  body.replaceChildren();
  for (const box of state.mailboxes || []) {
    const tr = el("tr", { "data-address": box.address });
    tr.appendChild(el("td", {}, box.address));
    tr.appendChild(el("td", {}, String(box.depth)));
    body.appendChild(tr);
  }
  $("mailbox-count").textContent = "(" + (state.mailboxes || []).length + ")";
  const outbox = $("outbox").tBodies[0];
  outbox.replaceChildren();
  for (const [name, count] of Object.entries(state.outbox || {})) {
    const tr = el("tr", { "data-state": name });
    tr.appendChild(el("td", {}, name));
    tr.appendChild(el("td", {}, String(count)));
    outbox.appendChild(tr);
  }
}
function tickCountdowns() {
  const now = Date.now() + ui.offsetMs;
  for (const cell of document.querySelectorAll("td.as-of[data-as-of]")) {
    const asOf = cell.getAttribute("data-as-of");
    if (asOf) cell.textContent = age((now - Date.parse(asOf)) / 1000);
  }
  for (const cell of document.querySelectorAll("td.countdown[data-expires]")) {
    const expires = cell.getAttribute("data-expires");
    if (!expires) continue;
    const left = (Date.parse(expires) - now) / 1000;
    cell.textContent = left > 0 ? left.toFixed(1) + " s" : "0.0 s (expired)";
    cell.classList.toggle("expired", left <= 0);
  }
}

function tree(value, key) {
  if (value !== null && typeof value === "object") {
    const details = el("details");
    if (key === undefined || ["agents", "orchestration", "pending_waits"].includes(key)) details.open = true;
    const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v]) : Object.entries(value);
    const summary = el("summary");
    summary.appendChild(el("span", { class: "key" }, key === undefined ? "snapshot" : key));
    summary.appendChild(document.createTextNode(Array.isArray(value) ? " [" + value.length + "]" : " {" + entries.length + "}"));
    details.appendChild(summary);
    for (const [k, v] of entries) details.appendChild(tree(v, k));
    return details;
  }
  const leaf = el("div", { class: "leaf" });
  leaf.appendChild(el("span", { class: "key" }, key + ": "));
  leaf.appendChild(document.createTextNode(JSON.stringify(value)));
  return leaf;
}
async function showSnapshot(crewId) {
  ui.selected = crewId;
  $("snapshot-crew").textContent = crewId;
  const response = await fetch(api("/api/crews/" + encodeURIComponent(crewId) + "/snapshot"));
  const body = await response.json();
  $("snapshot").replaceChildren(response.ok ? tree(body) : el("div", { class: "muted" }, body.error.message));
}

function renderAcl(acl) {
  const root = $("acl");
  root.replaceChildren();
  const n = acl.nodes.length;
  if (!n) { root.appendChild(svg("text", { x: 10, y: 20, class: "muted" }, "no links: registered")); return; }
  const cx = 210, cy = 150, r = n === 1 ? 0 : 110;
  const at = {};
  acl.nodes.forEach((node, i) => {
    const a = (2 * Math.PI * i) / n - Math.PI / 2;
    at[node.id] = [cx + r * Math.cos(a), cy + r * Math.sin(a)];
  });
  const defs = svg("defs");
  const marker = svg("marker", { id: "acl-head", viewBox: "0 0 10 10", refX: 28, refY: 5, markerWidth: 7,
    markerHeight: 7, orient: "auto-start-reverse" });
  marker.appendChild(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#4f46e5" }));
  defs.appendChild(marker);
  root.appendChild(defs);
  for (const edge of acl.edges) {
    const [x1, y1] = at[edge.from], [x2, y2] = at[edge.to];
    const attrs = { x1, y1, x2, y2, class: "edge", "data-from": edge.from, "data-to": edge.to, "data-direction": edge.direction };
    if (edge.direction !== "inbound") attrs["marker-end"] = "url(#acl-head)";
    if (edge.direction !== "outbound") attrs["marker-start"] = "url(#acl-head)";
    const line = svg("line", attrs);
    line.appendChild(svg("title", {}, edge.from + " \u2192 " + edge.to + " (" + edge.direction + ")"
      + (edge.topics.length ? " topics: " + edge.topics.join(", ") : "")));
    root.appendChild(line);
  }
  for (const node of acl.nodes) {
    const [x, y] = at[node.id];
    const g = svg("g", { class: "node" + (node.declared ? "" : " undeclared"), "data-node": node.id });
    g.appendChild(svg("circle", { cx: x, cy: y, r: 20 }));
    g.appendChild(svg("text", { x, y: y + 34, "text-anchor": "middle" }, node.id));
    root.appendChild(g);
  }
}

const METRICS = [
  ["messages", "messages/s", "orkeon_event_published_total"],
  ["latency", "latency ms", "orkeon_event_latency_seconds"],
  ["asleep", "crews asleep", "orkeon_crew_asleep_total"],
  ["timeouts", "timeouts/s", "orkeon_wait_timed_out_total"],
  ["waits", "pending waits", "orkeon_pending_waits_total"],
  ["refusals", "ACL refusals/s", "acl refusals"],
];
let lastCounts = null;
function sampleMetrics(state) {
  const c = ui.counts;
  const published = c.publish + c.post + c.send + c.reply;
  const prev = lastCounts || { published, timeout: c.timeout, acl: c.acl_refused };
  // the server counts each wait once (live and asleep), by kind
  const waits = Object.values(state.metrics.pending_waits || {}).reduce((a, b) => a + b, 0);
  const lat = ui.latencies.splice(0);
  const sample = {
    messages: published - prev.published,
    timeouts: c.timeout - prev.timeout,
    refusals: c.acl_refused - prev.acl,
    latency: lat.length ? lat.reduce((a, b) => a + b, 0) / lat.length : 0,
    asleep: state.metrics.asleep || 0,
    waits,
  };
  lastCounts = { published, timeout: c.timeout, acl: c.acl_refused };
  for (const [key] of METRICS) {
    ui.series[key].push(sample[key]);
    if (ui.series[key].length > 60) ui.series[key].shift();
  }
  renderMetrics(sample);
}
function renderMetrics(sample) {
  const root = $("metrics");
  root.replaceChildren();
  for (const [key, title, name] of METRICS) {
    const box = el("div", { class: "metric", "data-metric": key, title: name });
    box.appendChild(el("div", { class: "muted" }, title));
    box.appendChild(el("div", { class: "value" }, String(Math.round(sample[key] * 100) / 100)));
    const values = ui.series[key];
    const max = Math.max(1, ...values);
    const points = values.map((v, i) => (i * 2) + "," + (30 - (v / max) * 28)).join(" ");
    const chart = svg("svg", { width: 120, height: 32 });
    chart.appendChild(svg("polyline", { points }));
    box.appendChild(chart);
    root.appendChild(box);
  }
}

// -- the agent view: per agent, a lane of its model calls, tool calls, answers, failures --

const agents = { after: 0, calls: new Map(), order: [], lanes: new Map() };
// a lane: { key, crew, agent, items: [call ids and answers in order], tokensIn, tokensOut, cost, calls }

function laneFor(ev) {
  const key = ev.crew_id + "/" + ev.agent_id;
  let lane = agents.lanes.get(key);
  if (!lane) {
    lane = { key, crew: ev.crew_id, agent: ev.agent_id, items: [], tokensIn: 0, tokensOut: 0, cost: 0, calls: 0 };
    agents.lanes.set(key, lane);
  }
  return lane;
}
function onAgentEvent(ev) {
  const lane = laneFor(ev);
  if (ev.kind === "model_call_started" || ev.kind === "tool_call_started") {
    agents.calls.set(ev.call_id, { started: ev, finished: null });
    lane.items.push({ call: ev.call_id });
  } else if (ev.kind === "model_call_finished" || ev.kind === "tool_call_finished") {
    const call = agents.calls.get(ev.call_id);
    if (call) call.finished = ev;
    else { agents.calls.set(ev.call_id, { started: ev, finished: ev }); lane.items.push({ call: ev.call_id }); }
    if (ev.kind === "model_call_finished") {
      lane.tokensIn += ev.input_tokens; lane.tokensOut += ev.output_tokens; lane.cost += ev.cost; lane.calls += 1;
    }
  } else if (ev.kind === "agent_answered") {
    lane.items.push({ answer: ev });
  } else if (ev.kind === "agent_failed") {
    lane.items.push({ failure: ev });
  }
}
function money(cost) { return "$" + cost.toFixed(cost >= 1 ? 2 : 4); }
function seconds(s) { return s < 10 ? s.toFixed(2) + " s" : s.toFixed(1) + " s"; }
function content(text) { return text === null || text === undefined ? "(content capture off)" : text; }

function modelCall(call) {
  const { started, finished } = call;
  const failed = finished && finished.error;
  const div = el("div", { class: "call model" + (finished ? "" : " inflight") + (failed ? " failed" : ""),
    "data-call": started.call_id, "data-started": started.started_at });
  const parts = [started.model];
  if (finished) {
    parts.push(seconds(finished.duration_s), finished.input_tokens + " → " + finished.output_tokens + " tokens",
      money(finished.cost));
    if (finished.finish_reasons.length) parts.push(finished.finish_reasons.join(","));
    if (failed) parts.push("failed: " + finished.error);
  } else {
    parts.push("in flight");
  }
  div.appendChild(el("span", { class: "label" }, parts.join(" · ")));
  if (!finished) div.appendChild(el("span", { class: "elapsed" }, ""));
  const bar = el("div", { class: "bar" });
  bar.style.width = Math.min(600, 8 + 60 * (finished ? finished.duration_s : 0)) + "px";  // CSSOM: allowed by the CSP
  div.appendChild(bar);
  return div;
}
function toolCall(call) {
  const { started, finished } = call;
  const details = el("details", { class: "call tool", "data-call": started.call_id, "data-tool": started.name });
  const summary = started.name + (finished ? " · " + seconds(finished.duration_s) + (finished.error ? " · error" : "")
    + (finished.replayed ? " · replayed" : "") : " · running");
  details.appendChild(el("summary", {}, summary));
  details.appendChild(el("div", { class: "muted" }, "arguments"));
  details.appendChild(el("pre", { class: "arguments" }, content(started.arguments)));
  if (finished) {
    details.appendChild(el("div", { class: "muted" }, finished.error ? "error" : "result"));
    details.appendChild(el("pre", { class: "result" }, finished.error || content(finished.result)));
  }
  return details;
}
function failure(ev) {
  const where = ev.tool ? " in " + ev.tool : "";
  return el("div", { class: "failure", "data-reason": ev.reason }, "failed (" + ev.reason + where + "): " + ev.error);
}
function renderAgents() {
  const root = $("agents");
  const open = new Set([...root.querySelectorAll("details[open]")].map((d) => d.dataset.call));
  root.replaceChildren();
  const crews = new Map();
  const filter = $("filter-crew").value.trim();
  for (const lane of agents.lanes.values()) {
    const crew = crews.get(lane.crew) || { agents: 0, calls: 0, tokensIn: 0, tokensOut: 0, cost: 0 };
    crew.agents += 1; crew.calls += lane.calls; crew.tokensIn += lane.tokensIn; crew.tokensOut += lane.tokensOut;
    crew.cost += lane.cost;
    crews.set(lane.crew, crew);
    if (filter && !lane.crew.includes(filter)) continue;
    const box = el("div", { class: "agent-lane", "data-agent": lane.key });
    const title = el("h3", {}, lane.key);
    title.appendChild(el("span", { class: "totals" }, lane.calls + " model calls · " + lane.tokensIn
      + " → " + lane.tokensOut + " tokens · " + money(lane.cost)));
    box.appendChild(title);
    const turns = el("div", { class: "turns" });
    for (const item of lane.items) {
      if (item.answer) { turns.appendChild(el("div", { class: "answer" }, "answer: " + content(item.answer.text))); continue; }
      if (item.failure) { turns.appendChild(failure(item.failure)); continue; }
      const call = agents.calls.get(item.call);
      const node = call.started.kind.startsWith("model") ? modelCall(call) : toolCall(call);
      if (open.has(item.call)) node.open = true;
      turns.appendChild(node);
    }
    box.appendChild(turns);
    root.appendChild(box);
  }
  const body = $("agent-totals").tBodies[0];
  body.replaceChildren();
  for (const [name, crew] of crews) {
    const tr = el("tr", { "data-crew": name });
    for (const value of [name, crew.agents, crew.calls, crew.tokensIn, crew.tokensOut, money(crew.cost)]) {
      tr.appendChild(el("td", {}, String(value)));
    }
    body.appendChild(tr);
  }
  tickInFlight();
}
function tickInFlight() {
  const now = Date.now() + ui.offsetMs;
  for (const bar of document.querySelectorAll(".call.model.inflight")) {
    const elapsed = Math.max(0, (now - Date.parse(bar.dataset.started)) / 1000);
    bar.querySelector(".elapsed").textContent = " · " + elapsed.toFixed(1) + " s";
    bar.querySelector(".bar").style.width = Math.min(600, 8 + 60 * elapsed) + "px";
  }
}
async function refreshAgents() {
  try {
    const response = await fetch(api("/api/agents?after=" + agents.after));
    const body = await response.json();
    if (!response.ok) return;
    ui.offsetMs = Date.parse(body.now) - Date.now();
    $("agents-note").textContent = body.kept ? "" : "(this store keeps no agent events: an older release wrote it)";
    for (const ev of body.events) onAgentEvent(ev);
    agents.after = body.last_seq;
    if (body.events.length || !$("agents").dataset.drawn) { $("agents").dataset.drawn = "1"; renderAgents(); }
  } catch (error) {
    $("agents-note").textContent = "agent events unavailable: " + error;
  }
}

// -- polling, streaming, controls ----------------------------------------------------------

async function refresh() {
  try {
    const response = await fetch(api("/api/state"));
    const state = await response.json();
    ui.state = state;
    ui.offsetMs = Date.parse(state.now) - Date.now();
    $("source").textContent = state.mode + ": " + state.source + (state.read_only ? " (read-only)" : "");
    if ($("post-panel")) $("post-panel").hidden = state.read_only;  // absent from a read-only page
    renderCrews(state);
    renderWaits(state);
    renderMailboxes(state);
    renderAcl(state.acl);
    sampleMetrics(state);
    if (state.mode === "store") $("conn").dataset.state = "polling", $("conn").textContent = "polling the store";
  } catch (error) {
    $("conn").dataset.state = "lost";
    $("conn").textContent = "lost: " + error;
  }
}

function connect() {
  const source = new EventSource(api("/api/events"));
  source.onopen = () => {
    if (ui.state && ui.state.mode === "store") return;
    $("conn").dataset.state = "live"; $("conn").textContent = "live";
  };
  source.onmessage = (message) => onEvent(JSON.parse(message.data));
  source.addEventListener("dropped", (message) => {
    $("dropped").textContent = message.data + " events dropped (the page fell behind)";
  });
  source.onerror = () => {
    if (ui.state && ui.state.mode === "store") { source.close(); return; }
    $("conn").dataset.state = "lost"; $("conn").textContent = "reconnecting";
  };
}

$("pause").addEventListener("click", () => {
  ui.paused = !ui.paused;
  $("pause").textContent = ui.paused ? "Resume" : "Pause";
  if (!ui.paused) {
    for (const ev of ui.held.splice(0)) insertInOrder(ui.events, ev);
    if (ui.events.length > MAX_EVENTS) ui.events.splice(0, ui.events.length - MAX_EVENTS);
  }
  renderFlow();
});
for (const id of ["filter-crew", "filter-topic"]) {
  $(id).addEventListener("input", () => {
    renderFlow();
    renderAgents();
    if (ui.state) { renderCrews(ui.state); renderWaits(ui.state); }
  });
}
if ($("post-form")) $("post-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  let payload = $("post-payload").value;
  try { payload = payload ? JSON.parse(payload) : null; } catch (_) { /* sent as a string */ }
  const response = await fetch("/api/post", {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Studio-Token": TOKEN },
    body: JSON.stringify({ to: $("post-to").value, payload }),
  });
  const body = await response.json();
  $("post-result").textContent = response.ok ? "posted " + body.message_id : body.error.message;
});

refresh();
setInterval(refresh, 1000);
setInterval(tickCountdowns, 100);
refreshAgents();
setInterval(refreshAgents, 1000);
setInterval(tickInFlight, 100);
connect();
