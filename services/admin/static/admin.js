// The admin page: runs, steps, revisions and search from /v1/memory, rubric versions and diffs
// from /v1/rubrics, rollback through the memory's recorded admin rollback, and the approval or
// dismissal of held revisions. Text from the API is only ever set as textContent, never as HTML.
"use strict";

const KEY_STORE = "plaudit-admin-key";
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
  "#e377c2", "#7f7f7f", "#bcbd22"];

const state = { run: null, rubricId: null, selectedVersion: null, rollbacks: [] };
// Revision states as a person reads them (the API's words stay in data-state and the class).
const STATE_WORDS = {
  held: "held for your decision",
  applied: "applied",
  rejected: "rejected",
  running: "being worked out",
  queued: "waiting to start",
  approving: "being applied",
  failed: "failed",
  rolled_back: "rolled back by an admin",
};
// Dash patterns per plotted line, so lines whose values coincide still show (issue 21).
const DASHES = ["", "7 4", "2 3", "10 3 2 3", "4 2", "1 4"];

function $(id) { return document.getElementById(id); }

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// At most ``limit`` characters, cut at a word and marked, never in the middle of a word.
function shorten(text, limit) {
  if (text.length <= limit) return text;
  const cut = text.slice(0, limit);
  const space = cut.lastIndexOf(" ");
  return `${(space > limit / 2 ? cut.slice(0, space) : cut).trimEnd()} …`;
}

function fmt(value, digits = 3) {
  return typeof value === "number" && Number.isFinite(value) ? value.toFixed(digits) : "–";
}

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path, options = {}) {
  const headers = { Accept: "application/json" };
  const key = sessionStorage.getItem(KEY_STORE);
  if (key) headers.Authorization = `Bearer ${key}`;
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method: options.method || "GET",
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!response.ok) {
    const detail = data && data.error ? `${data.error.type}: ${data.error.message}` : text;
    throw new ApiError(response.status, `${response.status} ${detail}`.slice(0, 500));
  }
  return data;
}

function showError(error) {
  if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
    showLogin(error.status === 403 ? "This key lacks the admin scope." : "The key was refused.");
    return;
  }
  $("login").hidden = true;
  $("app").hidden = false;
  $("error").textContent = String(error.message || error);
}

function showLogin(message) {
  $("app").hidden = true;
  $("login").hidden = false;
  $("forget-key").hidden = true;
  $("login-error").textContent = message || "";
}

// --- runs -----------------------------------------------------------------------------------

async function loadRuns() {
  const page = await api("/v1/memory/runs?limit=200");
  $("login").hidden = true;
  $("app").hidden = false;
  $("forget-key").hidden = !sessionStorage.getItem(KEY_STORE);
  showWho().catch(() => {});
  const list = $("runs");
  list.replaceChildren();
  $("runs-empty").hidden = page.items.length > 0;
  for (const run of page.items) {
    const link = el("a", { href: `#run=${encodeURIComponent(run.run_id)}`, "data-run": run.run_id },
      run.run_id, el("small", {}, `${run.steps} steps · rubric v${run.rubric_version}`,
        run.paused ? " · paused" : "", run.flags && run.flags.length ? " · flagged" : ""));
    list.append(el("li", {}, link));
  }
  const wanted = new URLSearchParams(location.hash.slice(1)).get("run");
  const first = page.items.length ? page.items[0].run_id : null;
  const chosen = page.items.some((r) => r.run_id === wanted) ? wanted : first;
  if (chosen) await openRun(chosen);
}

// Who this page acts as: the key's owner id (never the key) and its scopes.
async function showWho() {
  const me = await api("/v1/auth/me");
  $("who").textContent = me.owner
    ? `signed in as ${me.owner} (${me.scopes.join(", ")})`
    : "no API keys on this server: open to loopback callers";
}

async function openRun(runId) {
  $("error").textContent = "";
  $("revision-done").textContent = "";
  const run = await api(`/v1/memory/runs/${encodeURIComponent(runId)}`);
  state.run = run;
  for (const link of document.querySelectorAll("#runs a")) {
    link.classList.toggle("selected", link.dataset.run === runId);
  }
  $("run").hidden = false;
  $("run-id").textContent = run.run_id;
  $("run-rubric").textContent = run.rubric_id;
  $("run-rubric").href = `/v1/rubrics/${encodeURIComponent(run.rubric_id)}`;
  $("run-version").textContent = run.rubric_version;
  $("run-paused").textContent = run.paused ? "paused" : "active";
  $("pause").textContent = run.paused ? "Resume revision" : "Pause revision";
  const flags = $("flags");
  flags.replaceChildren();
  for (const flag of run.flags || []) {
    flags.append(el("li", { class: "flag" }, `${flag.kind} at step ${flag.step}: `,
      flag.detail || ""));
  }
  drawPlot(run);
  await Promise.all([loadSteps(runId), loadRevisions(runId), openRubric(run.rubric_id)]);
  $("step").hidden = true;
  $("search-results").hidden = true;
}

// An SVG of the reward mean (left axis, its own range) and each criterion's pass rate (0..1).
function drawPlot(run) {
  const curve = [...(run.curve || [])].sort((a, b) => a.step - b.step);
  const holder = $("plot");
  holder.replaceChildren();
  $("legend").replaceChildren();
  if (!curve.length) {
    holder.append(el("p", { class: "muted" }, "No step has been summarised yet."));
    return;
  }
  const NS = "http://www.w3.org/2000/svg";
  const W = 640, H = 260, L = 44, R = 12, T = 10, B = 28;
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "reward mean and pass rates by step");
  const add = (tag, attrs, text) => {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    svg.append(node);
    return node;
  };
  const steps = curve.map((p) => p.step);
  const s0 = Math.min(...steps), s1 = Math.max(...steps);
  const x = (s) => L + (s1 === s0 ? (W - L - R) / 2 : ((s - s0) / (s1 - s0)) * (W - L - R));
  const rewards = curve.map((p) => p.reward_mean).filter(Number.isFinite);
  let r0 = Math.min(0, ...rewards), r1 = Math.max(1, ...rewards);
  if (r1 - r0 < 1e-9) r1 = r0 + 1;
  const yReward = (v) => T + (1 - (v - r0) / (r1 - r0)) * (H - T - B);
  const yRate = (v) => T + (1 - v) * (H - T - B);
  add("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999" });
  add("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#999" });
  for (const v of [r0, (r0 + r1) / 2, r1]) {
    add("text", { x: L - 4, y: yReward(v) + 4, "text-anchor": "end", "font-size": 10 }, fmt(v, 2));
  }
  for (const s of [...new Set([s0, Math.round((s0 + s1) / 2), s1])]) {
    const anchor = s === s1 && s1 !== s0 ? "end" : s === s0 && s1 !== s0 ? "start" : "middle";
    add("text", { x: x(s), y: H - 10, "text-anchor": anchor, "font-size": 10 }, `step ${s}`);
  }
  const series = [{ name: "reward mean", colour: "#000", width: 3, dash: "",
    points: curve.filter((p) => Number.isFinite(p.reward_mean))
      .map((p) => [x(p.step), yReward(p.reward_mean)]) }];
  const names = new Map((run.criteria || []).map((c) => [c.id, c.text]));
  const ids = [...new Set(curve.flatMap((p) => Object.keys(p.pass_rates || {})))].sort();
  ids.forEach((id, i) => {
    series.push({ name: `${id} pass rate`, title: names.get(id) || id,
      colour: PALETTE[i % PALETTE.length], width: Math.max(1.2, 2.6 - 0.3 * i),
      dash: DASHES[(i + 1) % DASHES.length],
      points: curve.filter((p) => p.pass_rates && Number.isFinite(p.pass_rates[id]))
        .map((p) => [x(p.step), yRate(p.pass_rates[id])]) });
  });
  for (const line of series) {
    if (!line.points.length) continue;
    const path = add("polyline", { points: line.points.map((p) => p.join(",")).join(" "),
      fill: "none", stroke: line.colour, "stroke-width": line.width,
      "stroke-dasharray": line.dash, class: "series", "data-series": line.name });
    if (line.title) path.append(Object.assign(document.createElementNS(NS, "title"),
      { textContent: line.title }));
    for (const [px, py] of line.points) {
      add("circle", { cx: px, cy: py, r: 2.5, fill: line.colour });
    }
    const key = el("span", { title: line.title || line.name }, line.name);
    key.style.setProperty("--colour", line.colour);
    $("legend").append(key);
  }
  holder.append(svg);
}

async function loadSteps(runId) {
  const page = await api(`/v1/memory/runs/${encodeURIComponent(runId)}/steps?limit=200`);
  const body = $("steps").tBodies[0];
  body.replaceChildren();
  for (const step of page.items) {
    const stats = step.stats || {};
    const row = el("tr", { class: "clickable", "data-step": step.step,
      onclick: () => openStep(runId, step.step) },
    el("td", {}, step.step), el("td", {}, step.rubric_version), el("td", {}, fmt(stats.reward_mean)),
    el("td", {}, fmt(stats.reward_std)), el("td", {}, (stats.saturated || []).join(", ") || "–"),
    el("td", { title: step.summary || "" }, shorten(step.summary || "", 240)));
    body.append(row);
  }
}

async function openStep(runId, step) {
  const detail = await api(`/v1/memory/runs/${encodeURIComponent(runId)}/steps/${step}`);
  for (const row of $("steps").tBodies[0].rows) {
    row.classList.toggle("selected", row.dataset.step === String(step));
  }
  $("step").hidden = false;
  $("step-number").textContent = step;
  $("step-summary").textContent = detail.summary || "(no written summary)";
  const list = $("analyses");
  list.replaceChildren();
  for (const item of detail.analyses || []) {
    list.append(el("li", { class: "analysis" }, `reward ${fmt(item.reward)}`,
      item.hacking ? " · possible reward hacking" : "", ": ", item.text || ""));
  }
}

async function loadRevisions(runId) {
  const page = await api(`/v1/memory/runs/${encodeURIComponent(runId)}/revisions?limit=200`);
  const body = $("revisions").tBodies[0];
  body.replaceChildren();
  const rows = [...page.items.map((rev) => ({ at: rev.created_at, row: revisionRow(rev) })),
    ...state.rollbacks.filter((r) => r.run_id === runId)
      .map((r) => ({ at: r.created_at, row: rollbackRow(r) }))];
  rows.sort((a, b) => String(b.at).localeCompare(String(a.at)));
  if (!rows.length) {
    body.append(el("tr", {}, el("td", { colspan: 6, class: "muted" },
      `No revision yet (one runs every ${state.run.revise_every} steps unless paused).`)));
  }
  for (const { row } of rows) body.append(row);
}

function revisionRow(rev) {
  const versions = rev.to_version ? `v${rev.from_version} → v${rev.to_version}`
    : `from v${rev.from_version ?? "?"}`;
  const ops = (rev.operations || []).map(operationItem);
  const why = [rev.rationale ? el("div", {}, "Analyst: ", rev.rationale) : null,
    rev.reason ? el("div", { class: `reason state-${rev.state}` }, rev.reason) : null,
    evidenceNote(rev), decidedNote(rev.detail || {})];
  return el("tr", { class: `revision state-${rev.state}`, "data-revision": rev.id,
    "data-state": rev.state },
  el("td", {}, rev.step ?? "–"), el("td", { class: `state-${rev.state}` },
    STATE_WORDS[rev.state] || rev.state),
  el("td", {}, versions), el("td", {}, ops.length ? el("ul", { class: "ops" }, ...ops) : "–"),
  el("td", {}, ...why), el("td", { class: "decide" }, ...decideButtons(rev)));
}

// One proposed operation with the criterion's old and new text, and why the checks took it or not.
function operationItem(op) {
  const before = op.before || {};
  const kind = op.op || op.kind || "edit";
  const parts = [el("strong", {}, `${kind} ${op.id || ""}`.trim())];
  if (kind === "add") {
    parts.push(": ", el("ins", {}, op.text || ""), ` (${op.kind || "required"}, weight ${op.weight})`);
  } else if (kind === "remove") {
    parts.push(": ", el("del", {}, before.text || op.text || ""));
  } else {
    if (op.text && op.text !== before.text) {
      parts.push(": ", el("del", {}, before.text || "?"), " → ", el("ins", {}, op.text));
    } else if (before.text) {
      parts.push(`: ${before.text}`);
    }
    if (op.weight !== undefined && op.weight !== null && op.weight !== before.weight) {
      parts.push(` · weight ${before.weight ?? "?"} → ${op.weight}`);
    }
  }
  if (op.accepted === false) parts.push(el("div", { class: "muted" }, `refused: ${op.reason || ""}`));
  return el("li", { class: op.accepted === false ? "op refused" : "op" }, ...parts);
}

function evidenceNote(rev) {
  const records = (rev.evidence || []).length;
  if (rev.step === null || rev.step === undefined) return null;
  return el("small", { class: "muted evidence" },
    `Evidence: step ${rev.step}${records ? `, ${records} memory records` : ""}.`);
}

// A rollback an admin made through the memory, shown among the revisions with its reason.
function rollbackRow(record) {
  const data = record.data || {};
  return el("tr", { class: "revision state-rolled_back", "data-rollback": record.id,
    "data-state": "rolled_back" },
  el("td", {}, record.step ?? "–"), el("td", { class: "state-rolled_back" }, STATE_WORDS.rolled_back),
  el("td", {}, `v${data.from_version} → v${data.to_version}`), el("td", {}, "rollback"),
  el("td", {}, data.reason || "", el("small", { class: "muted" },
    ` · ${(record.created_at || "").replace("T", " ").slice(0, 19)}`)),
  el("td", {}));
}

// Who approved or dismissed a held revision, and when (from the revision's detail).
function decidedNote(detail) {
  const decision = detail.approved || detail.dismissed;
  if (!decision) return null;
  const verb = detail.approved ? "approved" : "dismissed";
  const when = (decision.at || "").replace("T", " ").slice(0, 19);
  return el("small", { class: "muted" }, ` · ${verb} by an admin ${when}`);
}

// A held revision waits for the admin: apply it as the guard's override, or dismiss it.
function decideButtons(rev) {
  if (rev.state !== "held") return [];
  const button = (verb, label) => el("button", { type: "button", class: verb,
    "data-revision": rev.id, onclick: () => decide(rev, verb) }, label);
  return [button("approve", "Approve"), button("dismiss", "Dismiss")];
}

async function decide(rev, verb) {
  const question = verb === "approve"
    ? `Apply revision ${rev.id} to ${rev.rubric_id} (a new version on top of v${rev.from_version})?`
      + `\nThe guard held it: ${rev.reason || "no reason given"}`
    : `Dismiss revision ${rev.id}? Nothing is applied.`;
  if (!window.confirm(question)) return;
  try {
    const answer = await api(`/v1/memory/revisions/${encodeURIComponent(rev.id)}/${verb}`,
      { method: "POST" });
    await openRun(answer.run_id);
    $("revision-done").textContent = verb === "approve"
      ? `Approved ${answer.id}: version ${answer.to_version} of ${answer.rubric_id} is current.`
      : `Dismissed ${answer.id}.`;
  } catch (error) {
    showError(error);
    if (state.run) await loadRevisions(state.run.run_id).catch(() => {});
  }
}

// --- rubric versions, diff and rollback --------------------------------------------------------

async function openRubric(rubricId, version) {
  state.rubricId = rubricId;
  $("rubric").hidden = false;
  $("rollback-done").textContent = "";
  const [rubric, page, records] = await Promise.all([
    api(`/v1/rubrics/${encodeURIComponent(rubricId)}`),
    api(`/v1/rubrics/${encodeURIComponent(rubricId)}/versions?limit=1000`),
    api(`/v1/memory/records?kind=rubric_update&rubric_id=${encodeURIComponent(rubricId)}&limit=200`),
  ]);
  $("rubric-name").textContent = rubric.name;
  $("rubric-id").textContent = rubricId;
  if (state.run && state.run.rubric_id === rubricId) {
    $("run-rubric").textContent = `${rubric.name} (${rubricId})`;
  }
  state.rollbacks = records.items.filter((r) => (r.data || {}).operation === "rollback");
  const versions = page.items;
  const current = versions.find((v) => v.current);
  $("rubric-current").textContent = current ? current.version : "?";
  const shown = version || (current ? current.version : versions[versions.length - 1].version);
  state.selectedVersion = shown;
  const body = $("versions").tBodies[0];
  body.replaceChildren();
  for (const v of [...versions].reverse()) {
    const button = v.current ? el("span", { class: "muted" }, "current")
      : el("button", { type: "button", class: "rollback", "data-version": v.version,
        onclick: (event) => { event.stopPropagation(); rollback(v.version); } }, "Roll back to this");
    body.append(el("tr", { class: `clickable${v.version === shown ? " selected" : ""}`,
      "data-version": v.version, onclick: () => openRubric(rubricId, v.version) },
    el("td", {}, v.version), el("td", {}, (v.created_at || "").replace("T", " ").slice(0, 19)),
    el("td", {}, v.criteria), el("td", {}, versionNote(v)), el("td", {}, button)));
  }
  await showDiff(rubricId, shown);
}

// A version's note, and each admin rollback that made it current again (with the reason).
function versionNote(version) {
  const notes = [version.note || ""];
  for (const record of state.rollbacks) {
    const data = record.data || {};
    if (data.to_version !== version.version) continue;
    const when = (record.created_at || "").replace("T", " ").slice(0, 16);
    notes.push(el("div", { class: "rollback-note" },
      `current again ${when}: rolled back from v${data.from_version}`,
      data.reason ? ` (${data.reason})` : ""));
  }
  return el("div", {}, ...notes);
}

async function showDiff(rubricId, to) {
  const holder = $("diff");
  holder.replaceChildren();
  $("diff-to").textContent = to;
  $("diff-from").textContent = to > 1 ? to - 1 : "nothing";
  if (to <= 1) {
    const first = await api(`/v1/rubrics/${encodeURIComponent(rubricId)}?version=1`);
    holder.append(el("ul", {}, ...first.criteria.map((c) => el("li", { class: "added" },
      `${c.id} (${c.kind}, weight ${c.weight}${c.anchor ? ", anchor" : ""}): ${c.text}`))));
    return;
  }
  const diff = await api(`/v1/rubrics/${encodeURIComponent(rubricId)}/diff?from=${to - 1}&to=${to}`);
  const items = [];
  for (const c of diff.added) {
    items.push(el("li", { class: "added" }, `+ ${c.id} (${c.kind}, weight ${c.weight}): ${c.text}`));
  }
  for (const c of diff.removed) {
    items.push(el("li", { class: "removed" }, `− ${c.id} (${c.kind}, weight ${c.weight}): ${c.text}`));
  }
  for (const change of diff.changed) {
    const parts = Object.entries(change.changes).map(([field, values]) => el("div", {},
      `${field}: `, el("del", {}, JSON.stringify(values.from)), " → ",
      el("ins", {}, JSON.stringify(values.to))));
    items.push(el("li", { class: "changed" }, `~ ${change.id}`, ...parts));
  }
  for (const [field, values] of Object.entries(diff.fields || {})) {
    items.push(el("li", { class: "changed" }, `${field}: `, el("del", {}, JSON.stringify(values.from)),
      " → ", el("ins", {}, JSON.stringify(values.to))));
  }
  if (!items.length) items.push(el("li", { class: "muted" }, "No change (a rollback or a note only)."));
  holder.append(el("ul", { class: "diff-list" }, ...items));
}

async function rollback(version) {
  const rubricId = state.rubricId;
  if (!window.confirm(`Make version ${version} of ${rubricId} current again?`)) return;
  try {
    const body = { version, reason: "rolled back from the admin page" };
    if (state.run) body.run_id = state.run.run_id;
    const answer = await api(`/v1/memory/rubrics/${encodeURIComponent(rubricId)}/rollback`,
      { method: "POST", body });
    await openRubric(rubricId, answer.rubric.version);
    $("rollback-done").textContent =
      `Rolled back: version ${answer.rubric.version} is current (recorded as ${answer.record.id}).`;
    if (state.run) {
      $("run-version").textContent = answer.rubric.current_version;
      await loadRevisions(state.run.run_id);
    }
  } catch (error) { showError(error); }
}

// --- pause, search, key ------------------------------------------------------------------------

async function togglePause() {
  if (!state.run) return;
  const verb = state.run.paused ? "resume" : "pause";
  try {
    await api(`/v1/memory/runs/${encodeURIComponent(state.run.run_id)}/${verb}`, { method: "POST" });
    await openRun(state.run.run_id);
  } catch (error) { showError(error); }
}

function recordItem(record) {
  const score = record.score === undefined ? "" : ` (similarity ${fmt(record.score, 2)})`;
  return el("li", { class: "hit" }, `${record.kind} · step ${record.step ?? "–"}${score}: `,
    (record.text || "").slice(0, 300));
}

async function search(event) {
  event.preventDefault();
  if (!state.run) return;
  try {
    const hits = await api("/v1/memory/search", { method: "POST",
      body: { run_id: state.run.run_id, text: $("search-text").value } });
    $("search-static").replaceChildren(...hits.static.map(recordItem));
    $("search-dynamic").replaceChildren(...hits.dynamic.map(recordItem));
    $("search-results").hidden = false;
  } catch (error) { showError(error); }
}

async function start() {
  try { await loadRuns(); } catch (error) { showError(error); }
}

window.addEventListener("DOMContentLoaded", () => {
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY_STORE, $("key").value.trim());
    $("key").value = "";
    start();
  });
  $("forget-key").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_STORE);
    showLogin("");
  });
  $("pause").addEventListener("click", togglePause);
  $("search-form").addEventListener("submit", search);
  window.addEventListener("hashchange", () => {
    const wanted = new URLSearchParams(location.hash.slice(1)).get("run");
    if (wanted && (!state.run || state.run.run_id !== wanted)) openRun(wanted).catch(showError);
  });
  start();
});
