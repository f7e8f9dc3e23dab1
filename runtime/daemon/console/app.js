// The Quiver console: plain JavaScript over the daemon's own API. The
// session cookie travels with every same-origin request; no token is ever
// kept in the page. Data is put in the page with textContent only.
"use strict";

const $ = (id) => document.getElementById(id);

// An element with a class and text.
function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function pretty(value) {
  return JSON.stringify(value, null, 2);
}

// A JSON API call; an error answer throws an Error carrying its code.
async function api(method, path, body) {
  const options = { method, headers: {}, credentials: "same-origin" };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const error = new Error((data && data.message) || response.statusText);
    error.code = data && data.error;
    error.data = data && data.data;
    error.status = response.status;
    if (response.status === 401) showSignIn();
    throw error;
  }
  return data;
}

// ---- sign-in and pages ----

let feed = null;
let timers = [];
let current = "activity";

function showSignIn() {
  stopLive();
  $("tabs").hidden = true;
  for (const page of document.querySelectorAll(".page")) page.hidden = true;
  $("sign-in").hidden = false;
  $("token").focus();
}

function showConsole() {
  $("sign-in").hidden = true;
  $("tabs").hidden = false;
  startLive();
  const wanted = location.hash.replace("#", "");
  show(document.querySelector(`[data-tab="${wanted}"]`) ? wanted : "activity");
}

function show(tab) {
  current = tab;
  for (const page of document.querySelectorAll(".page")) page.hidden = page.id !== tab;
  for (const button of document.querySelectorAll("[data-tab]")) {
    if (button.dataset.tab === tab) button.setAttribute("aria-current", "page");
    else button.removeAttribute("aria-current");
  }
  if (location.hash !== "#" + tab) history.replaceState(null, "", "#" + tab);
  if (tab === "approvals") refreshApprovals();
  if (tab === "sessions") refreshSessions();
  if (tab === "catalog") refreshCatalogViews();
  if (tab === "health") refreshHealth();
  else closeStatusFeed();
  if (tab !== "sessions") closeSessionFeed();
}

$("sign-in-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("sign-in-error").textContent = "";
  try {
    await api("POST", "/v1/console/sign-in", { token: $("token").value });
    $("token").value = "";
    showConsole();
  } catch (error) {
    $("sign-in-error").textContent = error.message;
  }
});

$("sign-out").addEventListener("click", async () => {
  try {
    await api("POST", "/v1/console/sign-out");
  } finally {
    showSignIn();
  }
});

for (const button of document.querySelectorAll("[data-tab]")) {
  button.addEventListener("click", () => show(button.dataset.tab));
}

// Left and right arrows move between the page buttons (Tab and Enter
// work as everywhere); Home and End go to the first and last.
$("tabs").addEventListener("keydown", (event) => {
  const buttons = [...document.querySelectorAll("[data-tab]")];
  const at = buttons.indexOf(document.activeElement);
  if (at < 0) return;
  const next = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: buttons.length - 1 }[event.key];
  if (next === undefined) return;
  event.preventDefault();
  const button = buttons[(next + buttons.length) % buttons.length];
  button.focus();
  show(button.dataset.tab);
});

function startLive() {
  stopLive();
  openFeed();
  refreshApprovals();
  // Approvals also come from the feed at once; this catches any missed.
  timers.push(setInterval(refreshApprovals, 3000));
  timers.push(setInterval(tickWaiting, 1000));
  timers.push(setInterval(() => { if (current === "health") refreshHealth(); }, 10000));
}

function stopLive() {
  if (feed) feed.close();
  feed = null;
  closeStatusFeed();
  closeSessionFeed();
  for (const timer of timers) clearInterval(timer);
  timers = [];
}

// ---- activity ----

// The latest status of each call, by call id (approvals use it to say
// how a call another client answered went).
const callStatus = new Map();
const MAX_FEED = 500;

function openFeed() {
  // EventSource reconnects by itself and sends Last-Event-ID, which the
  // endpoint replays from, so nothing is lost across a reconnect.
  feed = new EventSource("/v1/events");
  feed.addEventListener("open", () => { $("feed-state").textContent = "live"; });
  feed.addEventListener("error", () => {
    $("feed-state").textContent = "reconnecting…";
    // A closed stream is often a signed-out session.
    if (feed && feed.readyState === EventSource.CLOSED) api("GET", "/v1/health").catch(() => {});
  });
  feed.addEventListener("activity", (event) => {
    const record = JSON.parse(event.data);
    addRecord(record);
    if (record.call_id) callStatus.set(record.call_id, record.status);
    if (record.status === "awaiting_approval") refreshApprovals();
    else if (approvalsByCall.has(record.call_id)) refreshApprovals();
  });
}

function addRecord(record) {
  const item = el("li", "call");
  item.dataset.session = record.session;
  item.dataset.tool = record.tool;
  item.dataset.status = record.status;
  const head = el("div", "head");
  head.append(el("span", "tool", record.tool));
  if (record.via_bridge) head.append(el("span", "meta", "via tool_call"));
  head.append(el("span", "status status-" + record.status, record.status));
  head.append(el("span", "meta", record.duration_ms + " ms"));
  head.append(el("span", "meta", "session " + record.session));
  head.append(el("span", "meta", new Date(record.time_ms).toLocaleTimeString()));
  item.append(head);
  if (record.answered_by) head.append(el("span", "meta answered-by", "approval answered by " + record.answered_by));
  if (record.arguments && Object.keys(record.arguments).length) {
    item.append(el("pre", "arguments", pretty(record.arguments)));
  }
  if (record.detail) item.append(el("pre", "detail", record.detail));
  if (record.result !== undefined && record.result !== null) item.append(resultBlock(record.result));
  filterOne(item);
  const list = $("feed");
  list.prepend(item);
  while (list.children.length > MAX_FEED) list.lastElementChild.remove();
}

// A call's result (redacted and cut by the daemon), folded when long so
// the feed stays scannable; Enter or Space on the summary opens it.
function resultBlock(result) {
  const text = typeof result === "string" ? result : pretty(result);
  const block = el("details", "result");
  block.open = text.length <= 300;
  block.append(el("summary", "", "result"), el("pre", "", text));
  return block;
}

function filterOne(item) {
  const session = $("filter-session").value.trim();
  const tool = $("filter-tool").value.trim();
  const status = $("filter-status").value;
  item.hidden = (session && !item.dataset.session.includes(session)) ||
    (tool && !item.dataset.tool.includes(tool)) ||
    (status && item.dataset.status !== status);
}

for (const id of ["filter-session", "filter-tool", "filter-status"]) {
  $(id).addEventListener("input", () => {
    for (const item of $("feed").children) filterOne(item);
  });
}

// ---- approvals ----

const approvalsByCall = new Map();
// Who answered each recent approval, by approval id (from the daemon).
const answeredById = new Map();

function answeredText(answered) {
  if (!answered) return "Answered by another client";
  const when = new Date(answered.answered_ms).toLocaleTimeString();
  return `Answered by ${answered.answered_by} (${answered.decision.replaceAll("_", " ")}) at ${when}`;
}
// Approvals this page answered or saw answered elsewhere.
const answeredHere = new Set();

async function refreshApprovals() {
  let data;
  try {
    data = await api("GET", "/v1/approvals");
  } catch (_) {
    return;
  }
  const pending = data.approvals;
  for (const answered of data.answered || []) answeredById.set(String(answered.id), answered);
  const count = $("approval-count");
  count.hidden = pending.length === 0;
  count.textContent = pending.length;
  $("approvals-empty").hidden = pending.length > 0;
  const list = $("approval-list");
  const seen = new Set();
  for (const approval of pending) {
    seen.add(String(approval.id));
    approvalsByCall.set(approval.call_id, approval.id);
    if (list.querySelector(`[data-id="${approval.id}"]`)) continue;
    list.append(approvalCard(approval));
  }
  for (const card of [...list.children]) {
    if (!seen.has(card.dataset.id) && !card.classList.contains("answered")) {
      // Answered by another client: say who, and how the call went.
      card.classList.add("answered");
      const status = callStatus.get(Number(card.dataset.call));
      card.querySelector(".answer").textContent =
        answeredText(answeredById.get(card.dataset.id)) + (status ? ` (call now ${status})` : "") + ".";
      for (const button of card.querySelectorAll("button")) button.disabled = true;
      setTimeout(() => card.remove(), 15000);
    }
  }
}

function approvalCard(approval) {
  const card = el("li", "approval");
  card.dataset.id = approval.id;
  card.dataset.call = approval.call_id;
  card.dataset.requested = approval.requested_ms;
  const head = el("div", "head");
  head.append(el("span", "tool", approval.tool));
  if (approval.via_bridge) head.append(el("span", "meta", "via tool_call"));
  head.append(el("span", "meta", "session " + approval.session));
  head.append(el("span", "meta waiting", ""));
  card.append(head);
  card.append(el("pre", "arguments", pretty(approval.arguments)));
  const row = el("div", "row");
  const answers = [["approve", "Approve"], ["approve_for_session", "Approve for session"], ["deny", "Deny"]];
  for (const [decision, label] of answers) {
    const button = el("button", decision === "deny" ? "danger" : "", label);
    button.type = "button";
    button.dataset.decision = decision;
    button.addEventListener("click", () => answer(card, approval, decision));
    row.append(button);
  }
  card.append(row);
  card.append(el("p", "answer meta", ""));
  updateWaiting(card);
  return card;
}

async function answer(card, approval, decision) {
  for (const button of card.querySelectorAll("button")) button.disabled = true;
  try {
    // The digest pins the answer to the arguments shown here.
    const done = await api("POST", `/v1/approvals/${approval.id}`, { decision, digest: approval.digest });
    card.classList.add("answered");
    card.querySelector(".answer").textContent = `Answered by ${done.answered_by}: ${decision.replaceAll("_", " ")}.`;
    setTimeout(() => card.remove(), 5000);
  } catch (error) {
    card.classList.add("answered");
    card.querySelector(".answer").textContent = error.code === "not_pending"
      ? "Another client answered first: " + answeredText(error.data) + "."
      : `Not answered: ${error.message}`;
    if (error.code !== "not_pending") {
      card.classList.remove("answered");
      for (const button of card.querySelectorAll("button")) button.disabled = false;
    }
  }
  refreshApprovals();
}

function updateWaiting(card) {
  const seconds = Math.max(0, Math.round((Date.now() - Number(card.dataset.requested)) / 1000));
  const waiting = card.querySelector(".waiting");
  if (waiting && !card.classList.contains("answered")) waiting.textContent = `waiting ${seconds} s`;
}

function tickWaiting() {
  for (const card of $("approval-list").children) updateWaiting(card);
}

// ---- sessions ----

let openSession = null;

async function refreshModels() {
  const status = await api("GET", "/v1/status");
  for (const id of ["new-session-model", "session-model"]) {
    const select = $(id);
    const keep = select.value;
    select.replaceChildren();
    for (const model of status.models) {
      const option = el("option", "", model.name);
      option.value = model.name;
      if (model.name === (keep || status.default_model)) option.selected = true;
      select.append(option);
    }
  }
  return status;
}

async function refreshSessions() {
  await refreshModels().catch(() => {});
  const data = await api("GET", "/v1/sessions").catch(() => null);
  if (!data) return;
  const list = $("session-list");
  list.replaceChildren();
  for (const session of data.sessions) {
    const item = el("li");
    const open = el("button", "linkish", session.id);
    open.type = "button";
    open.addEventListener("click", () => openTranscript(session.id));
    item.append(open);
    item.append(el("span", "meta", `${session.kind} · ${session.model || "no model"} · ${session.messages} messages`));
    list.append(item);
  }
}

// The open session's live feed: its turns' text as the model streams it,
// and its tool calls as they happen, until the stored transcript is read
// again.
let sessionFeed = null;

function closeSessionFeed() {
  if (sessionFeed) sessionFeed.close();
  sessionFeed = null;
}

function openSessionFeed(id) {
  closeSessionFeed();
  sessionFeed = new EventSource(`/v1/sessions/${encodeURIComponent(id)}/events`);
  sessionFeed.addEventListener("message.delta", (event) => {
    const data = JSON.parse(event.data);
    if (typeof data.text !== "string") return;
    let streaming = $("transcript").querySelector("li.streaming");
    if (!streaming) {
      streaming = el("li", "message streaming");
      streaming.append(el("span", "role", "assistant"), el("span", "meta", " writing…"), el("pre", "", ""));
      $("transcript").append(streaming);
    }
    streaming.querySelector("pre").textContent += data.text;
  });
  sessionFeed.addEventListener("message.done", (event) => {
    const data = JSON.parse(event.data);
    const streaming = $("transcript").querySelector("li.streaming");
    if (streaming) streaming.remove();
    $("transcript").append(messageItem(data.message));
  });
  sessionFeed.addEventListener("activity", (event) => {
    const record = JSON.parse(event.data);
    if (record.status === "awaiting_approval") return;
    const item = el("li", "message tool-call");
    item.append(el("span", "role", "tool call"), el("span", "tool", " " + record.tool), el("span", "status status-" + record.status, record.status));
    if (record.result !== undefined && record.result !== null) item.append(resultBlock(record.result));
    else if (record.detail) item.append(el("pre", "detail", record.detail));
    $("transcript").append(item);
  });
}

function messageItem(message) {
  const item = el("li", "message");
  item.append(el("span", "role", message.role));
  if (typeof message.content === "string" && message.content) item.append(el("pre", "", message.content));
  const rest = Object.assign({}, message);
  for (const key of ["role", "content", "seq", "created_ms"]) delete rest[key];
  if (Object.keys(rest).length) item.append(el("pre", "meta", pretty(rest)));
  return item;
}

async function openTranscript(id) {
  if (openSession !== id || !sessionFeed) openSessionFeed(id);
  openSession = id;
  $("session-view").hidden = false;
  $("session-id").textContent = id;
  $("session-note").textContent = "";
  const data = await api("GET", `/v1/sessions/${encodeURIComponent(id)}`);
  if (data.session && data.session.model) $("session-model").value = data.session.model;
  const transcript = $("transcript");
  transcript.replaceChildren();
  for (const message of data.messages) transcript.append(messageItem(message));
}

$("new-session").addEventListener("submit", async (event) => {
  event.preventDefault();
  try {
    const session = await api("POST", "/v1/sessions", { model: $("new-session-model").value || undefined });
    await refreshSessions();
    await openTranscript(session.id);
  } catch (error) {
    $("session-note").textContent = error.message;
  }
});

$("send-message").addEventListener("submit", async (event) => {
  event.preventDefault();
  const content = $("message").value;
  if (!openSession || !content.trim()) return;
  $("session-note").textContent = "Running the turn…";
  $("message").value = "";
  $("transcript").append(messageItem({ role: "user", content }));
  try {
    await api("POST", `/v1/sessions/${encodeURIComponent(openSession)}/messages`, { content });
    $("session-note").textContent = "Turn done.";
  } catch (error) {
    $("session-note").textContent = error.message;
  }
  await openTranscript(openSession);
});

$("session-switch").addEventListener("click", async () => {
  if (!openSession) return;
  try {
    await api("PATCH", `/v1/sessions/${encodeURIComponent(openSession)}`, { model: $("session-model").value });
    $("session-note").textContent = `Model switched to ${$("session-model").value}.`;
  } catch (error) {
    $("session-note").textContent = error.message;
  }
});

$("session-delete").addEventListener("click", async () => {
  if (!openSession || !confirm(`Delete session ${openSession}?`)) return;
  try {
    await api("DELETE", `/v1/sessions/${encodeURIComponent(openSession)}`);
    openSession = null;
    closeSessionFeed();
    $("session-view").hidden = true;
  } catch (error) {
    $("session-note").textContent = error.message;
  }
  refreshSessions();
});

// ---- catalog ----

function catalogBase() {
  const view = $("catalog-view").value;
  return view ? `/v1/sessions/${encodeURIComponent(view)}/catalog` : "/v1/catalog";
}

async function refreshCatalogViews() {
  const data = await api("GET", "/v1/sessions").catch(() => ({ sessions: [] }));
  const select = $("catalog-view");
  const keep = select.value;
  select.replaceChildren();
  const gateway = el("option", "", "gateway (all tools)");
  gateway.value = "";
  select.append(gateway);
  for (const session of data.sessions) {
    const option = el("option", "", "session " + session.id);
    option.value = session.id;
    select.append(option);
  }
  select.value = [...select.options].some((o) => o.value === keep) ? keep : "";
  refreshCatalog();
}

function summary(target, entries) {
  target.replaceChildren();
  for (const [label, value] of entries) {
    const box = el("div");
    box.append(el("dt", "", label), el("dd", "", value));
    target.append(box);
  }
}

async function refreshCatalog() {
  const data = await api("GET", catalogBase()).catch(() => null);
  if (!data) return;
  summary($("catalog-summary"), [
    ["Tier", data.tier],
    ["Listing", data.listing_form],
    ["Listing tokens", data.listing_tokens],
    ["Deferred tools", data.deferred_count],
    ["Tokens with tool search", data.tokens_with_tool_search],
    ["Tokens without", data.tokens_without_tool_search],
    ["Saved", `${data.saved_tokens} (${data.saved_pct}%)`],
  ]);
  const body = $("catalog-servers").querySelector("tbody");
  body.replaceChildren();
  for (const server of data.servers) {
    const row = el("tr");
    row.append(el("td", "", server.name), el("td", "", server.mode), el("td", "", server.tools));
    body.append(row);
  }
  $("catalog-listing").textContent = data.listing;
}

$("catalog-view").addEventListener("change", refreshCatalog);
$("catalog-refresh").addEventListener("click", refreshCatalogViews);

$("catalog-search").addEventListener("submit", async (event) => {
  event.preventDefault();
  const list = $("search-results");
  list.replaceChildren();
  $("describe").hidden = true;
  $("search-note").textContent = "";
  let data;
  try {
    data = await api("GET", `${catalogBase()}/search?query=${encodeURIComponent($("search-query").value)}`);
  } catch (error) {
    $("search-note").textContent = error.message;
    return;
  }
  if (data.note) $("search-note").textContent = data.note;
  for (const match of data.matches || []) {
    const item = el("li", "match");
    const name = el("button", "linkish", match.name);
    name.type = "button";
    name.addEventListener("click", () => describe(match.name));
    item.append(name);
    item.append(el("span", "meta", "score " + match.score));
    item.append(el("span", "", match.description));
    list.append(item);
  }
});

async function describe(name) {
  const target = $("describe");
  try {
    target.textContent = pretty(await api("GET", `${catalogBase()}/describe?name=${encodeURIComponent(name)}`));
  } catch (error) {
    target.textContent = error.message;
  }
  target.hidden = false;
}

// ---- savings and health ----

// The last reading of the tool-call counter, for calls per minute.
let lastCalls = null;
// The live status stream (plugins and MCP servers), open while the
// Health page is shown.
let statusFeed = null;

async function refreshHealth() {
  const status = await api("GET", "/v1/status").catch(() => null);
  if (!status) return;
  const catalog = await api("GET", "/v1/catalog").catch(() => null);
  const savings = await api("GET", "/v1/savings").catch(() => null);
  const now = savings ? savings.now : null;
  let perMinute = "…";
  if (now && lastCalls && now.time_ms > lastCalls.time_ms) {
    perMinute = ((now.tool_calls - lastCalls.tool_calls) / ((now.time_ms - lastCalls.time_ms) / 60000)).toFixed(1);
  }
  if (now) lastCalls = now;
  const perAssembly = (total) => now && now.assemblies ? Math.round(total / now.assemblies) : "…";
  summary($("health-summary"), [
    ["Version", status.version],
    ["Uptime", `${status.uptime_s} s`],
    ["Tools", status.tools],
    ["Tokens with tool search", catalog ? catalog.tokens_with_tool_search : "?"],
    ["Tokens without", catalog ? catalog.tokens_without_tool_search : "?"],
    ["Saved", catalog ? `${catalog.saved_pct}%` : "?"],
    ["Assemblies", now ? now.assemblies : "?"],
    ["Per assembly, with / without", now ? `${perAssembly(now.tokens_with_tool_search)} / ${perAssembly(now.tokens_without_tool_search)}` : "?"],
    ["Saved over the daemon's life", now ? now.tokens_without_tool_search - now.tokens_with_tool_search : "?"],
    ["Tool calls", now ? now.tool_calls : "?"],
    ["Calls per minute", perMinute],
    ["Searches", now ? now.searches : "?"],
    ["Search misses", now ? now.search_misses : "?"],
    ["Pending approvals", status.pending_approvals],
    ["Config generation", status.config.generation],
  ]);
  if (savings) drawSavings([...savings.points, savings.now]);
  renderStatus({ plugins: status.plugins, mcp_servers: status.mcp_servers });
  if (!statusFeed) openStatusFeed();
}

// Plugins and MCP servers change as files are dropped in and servers come
// and go: the daemon sends their state at once and on every change.
function openStatusFeed() {
  statusFeed = new EventSource("/v1/status/events");
  statusFeed.addEventListener("status", (event) => {
    renderStatus(JSON.parse(event.data));
    $("status-state").textContent = "live";
  });
  statusFeed.addEventListener("error", () => { $("status-state").textContent = "reconnecting…"; });
}

function closeStatusFeed() {
  if (statusFeed) statusFeed.close();
  statusFeed = null;
  $("status-state").textContent = "";
}

function renderStatus(status) {
  const plugins = $("health-plugins");
  plugins.replaceChildren();
  for (const plugin of status.plugins.plugins) {
    const item = el("li", "plugin");
    item.dataset.name = plugin.name || plugin.file;
    item.dataset.generation = plugin.generation;
    item.append(el("span", "tool", plugin.name || plugin.file));
    item.append(el("span", "meta", `v${plugin.version} · generation ${plugin.generation} · ${plugin.tools.length} tools`));
    item.append(el("span", "status status-" + (plugin.health === "healthy" ? "ok" : "error"), plugin.health));
    if (plugin.tools.length) item.append(el("span", "meta tools", plugin.tools.join(", ")));
    if (plugin.last_error) item.append(el("span", "error", "last error: " + plugin.last_error));
    plugins.append(item);
  }
  const servers = $("health-servers");
  servers.replaceChildren();
  for (const server of status.mcp_servers) {
    const item = el("li", "server");
    item.dataset.name = server.name;
    item.append(el("span", "tool", server.name));
    item.append(el("span", "status status-" + (server.state === "ready" ? "ok" : "error"), server.state));
    const parts = [server.transport];
    if (server.tools !== undefined) parts.push(server.tools + " tools");
    parts.push(`${server.reconnects || 0} reconnects`);
    if (server.quarantined) parts.push(`${server.quarantined} quarantined`);
    item.append(el("span", "meta", parts.join(" · ")));
    if (server.error) item.append(el("span", "error", "last error: " + server.error));
    servers.append(item);
  }
}

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attributes, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = String(text);
  return node;
}

// The two charts of the Health page, drawn as SVG by this script (no
// library, nothing fetched): tokens of tool definitions summed over the
// daemon's life with and without tool search, and tool calls per minute
// with search misses.
function drawSavings(points) {
  const times = points.map((p) => p.time_ms);
  lineChart($("chart-tokens"), times, [
    { label: "without tool search", cls: "series-without", values: points.map((p) => p.tokens_without_tool_search) },
    { label: "with tool search", cls: "series-with", values: points.map((p) => p.tokens_with_tool_search) },
  ], "tokens of tool definitions, summed");
  const perMinute = points.map((p, i) => {
    if (i === 0) return 0;
    const minutes = (p.time_ms - points[i - 1].time_ms) / 60000;
    return minutes > 0 ? (p.tool_calls - points[i - 1].tool_calls) / minutes : 0;
  });
  lineChart($("chart-calls"), times, [
    { label: "tool calls per minute", cls: "series-with", values: perMinute },
    { label: "search misses (total)", cls: "series-without", values: points.map((p) => p.search_misses) },
  ], "calls and misses");
}

function lineChart(target, times, series, title) {
  const width = 600, height = 200, left = 48, right = 8, top = 24, bottom = 22;
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", class: "chart" });
  const max = Math.max(1, ...series.flatMap((s) => s.values));
  const start = Math.min(...times), end = Math.max(...times);
  const x = (t) => left + (end > start ? (t - start) / (end - start) : 1) * (width - left - right);
  const y = (v) => top + (1 - v / max) * (height - top - bottom);
  chart.append(svg("title", {}, title + ": " + series.map((s) => `${s.label} ${Math.round(s.values[s.values.length - 1])}`).join(", ")));
  chart.append(svg("line", { x1: left, y1: y(0), x2: width - right, y2: y(0), class: "axis" }));
  chart.append(svg("line", { x1: left, y1: top, x2: left, y2: y(0), class: "axis" }));
  chart.append(svg("text", { x: left - 4, y: top + 4, class: "label end" }, Math.round(max)));
  chart.append(svg("text", { x: left - 4, y: y(0), class: "label end" }, 0));
  chart.append(svg("text", { x: left, y: height - 6, class: "label" }, new Date(start).toLocaleTimeString()));
  chart.append(svg("text", { x: width - right, y: height - 6, class: "label end" }, new Date(end).toLocaleTimeString()));
  series.forEach((s, index) => {
    const coordinates = s.values.map((v, i) => `${x(times[i]).toFixed(1)},${y(v).toFixed(1)}`);
    chart.append(svg("polyline", { points: coordinates.join(" "), class: "series " + s.cls }));
    const last = coordinates[coordinates.length - 1].split(",");
    chart.append(svg("circle", { cx: last[0], cy: last[1], r: 3, class: "dot " + s.cls }));
    chart.append(svg("text", { x: left + 8 + index * 200, y: 14, class: "label legend " + s.cls }, `${s.label}: ${Math.round(s.values[s.values.length - 1])}`));
  });
  target.replaceChildren(chart);
}

// ---- start ----

// The one-time link printed by `quiver serve` carries its code in the
// fragment (never sent to the server); it is traded for a cookie and
// taken out of the address bar and history.
async function start() {
  const once = location.hash.startsWith("#once=") ? location.hash.slice(6) : null;
  if (once) {
    history.replaceState(null, "", location.pathname + "#activity");
    try {
      await api("POST", "/v1/console/sign-in", { once });
    } catch (error) {
      showSignIn();
      $("sign-in-error").textContent = error.message;
      return;
    }
  }
  api("GET", "/v1/health").then(showConsole, () => showSignIn());
}

start();
