// pifleet web page: a client of the control API (/v1/…) and nothing else.
// Every value that comes from the fleet — worker output above all — is put
// into the page as text (textContent, attribute values), never as markup.
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]').content;
const $ = (id) => document.getElementById(id);
const transitions = JSON.parse($("transitions").textContent);

// ---- small helpers ----

// h builds an element: h("div", {class: "x", onclick: fn}, "text", child…).
// Strings become text nodes, so nothing a worker writes is ever parsed.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}
function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
function replace(el, ...children) { el.replaceChildren(); return append(el, children); }

function toast(msg, bad) {
  const t = h("div", { class: "toast" + (bad ? " bad" : ""), role: bad ? "alert" : "status" }, msg);
  $("toasts").append(t);
  setTimeout(() => t.remove(), bad ? 9000 : 4000);
}

const ago = (iso) => {
  if (!iso) return "";
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 60) return Math.floor(s) + "s ago";
  if (s < 3600) return Math.floor(s / 60) + "m ago";
  if (s < 86400) return Math.floor(s / 3600) + "h ago";
  return Math.floor(s / 86400) + "d ago";
};
const short = (s, n) => (s && s.length > n ? s.slice(0, n - 1) + "…" : s || "");
const badge = (state, extra) => h("span", { class: "state s-" + String(state).replace(/[^a-z_]/g, ""), title: extra || "" }, state);
const finalStates = new Set(["stopped", "failed"]);

// ---- the control API ----

class APIError extends Error {
  constructor(status, body) {
    super((body && body.message) || "HTTP " + status);
    this.status = status;
    this.code = body && body.code;
  }
}

async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: {} };
  if (method !== "GET") init.headers["X-CSRF-Token"] = csrf;
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch("/v1" + path, init);
  if (resp.status === 401) loggedOut();
  if (!resp.ok) {
    let b = null;
    try { b = await resp.json(); } catch (_) { /* not JSON */ }
    throw new APIError(resp.status, b);
  }
  if (resp.status === 204) return null;
  const type = resp.headers.get("Content-Type") || "";
  if (type.startsWith("application/x-ndjson")) return resp;
  return resp.json();
}
const seg = encodeURIComponent;

// spawnLike runs a spawn or a resume, reporting progress lines.
async function spawnLike(path, body, onProgress) {
  const res = await api("POST", path, body);
  if (!(res instanceof Response)) return res;
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (value) buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const l = JSON.parse(line);
      if (l.progress) onProgress(l.progress);
      if (l.result) return l.result;
      if (l.error) throw new APIError(422, l.error);
    }
    if (done) throw new Error("the server ended the spawn without an answer");
  }
}

// act runs an operation from a button: disabled while it runs, errors
// shown, the view refreshed after.
async function act(button, fn, done) {
  if (button) button.disabled = true;
  try {
    const r = await fn();
    if (done) toast(done);
    return r;
  } catch (e) {
    toast(e.message, true);
  } finally {
    if (button) button.disabled = false;
    refreshSoon(0);
  }
}

let wasLoggedOut = false;
function loggedOut() {
  if (wasLoggedOut) return;
  wasLoggedOut = true;
  setLive("off", "logged out");
  toast("Your session ended. Run pifleet-server ui to log in again.", true);
  setTimeout(() => location.reload(), 2500);
}

// ---- the model ----

const model = {
  status: { agents: [], instances: [], tasks: [], baselines: [] },
  byId: new Map(),
  agentsByName: new Map(),
  loaded: false,
};

function setStatus(st) {
  // A backend may leave an empty list out (null in JSON).
  for (const k of ["agents", "instances", "tasks", "baselines"]) st[k] = st[k] || [];
  model.status = st;
  model.byId = new Map(st.instances.map((i) => [i.id, i]));
  model.agentsByName = new Map(st.agents.map((a) => [a.name, a]));
  model.loaded = true;
}

// policyOf: what the machine's trust policy lets the page offer.
function policyOf(agentName) {
  const a = model.agentsByName.get(agentName);
  return (a && a.policy) || "allow";
}
const canSteer = (agentName) => policyOf(agentName) === "steer";
// canStop: stopping a worker is the kind of access starting one is, which
// allow grants as well as steer (the server's rule).
const canStop = (agentName) => ["allow", "steer"].includes(policyOf(agentName));

// timelines: the states each worker went through while the page watched
// (the seed's names, as the stream reports them).
const timelines = new Map();
function note(id, state) {
  if (!id || !state) return;
  const t = timelines.get(id) || [];
  if (!t.length || t[t.length - 1].state !== state) t.push({ state, at: Date.now() });
  if (t.length > 40) t.splice(0, t.length - 40);
  timelines.set(id, t);
}
function historyLine(t) {
  if (!t || t.length < 2) return null;
  const shown = t.slice(-8);
  return h("div", { class: "history", title: "states seen on this page" },
    t.length > shown.length ? "… → " : "", shown.map((x, i) => [i ? " → " : "", h("span", { class: "hs" }, x.state)]));
}

// spawning: the spawns this page started, until the worker is idle. The
// instance id comes with the end of the spawn, so until then the card is
// fed by the spawn's own progress lines: requested, spawning (accepted),
// provisioning, degraded_cache.
const spawning = new Map();
let spawnSeq = 0;
const phaseState = { accepted: "spawning", provisioning: "provisioning", degraded: "degraded_cache", starting: "provisioning" };

// ---- refreshing: one status fetch at a time, at most every refreshGap ms ----

const refreshGap = 700;
let refreshing = false, refreshAgain = false, lastRefresh = 0, refreshTimer = 0;

function refreshSoon(delay) {
  if (refreshTimer) return;
  const wait = Math.max(delay ?? 0, refreshGap - (Date.now() - lastRefresh));
  refreshTimer = setTimeout(() => { refreshTimer = 0; refresh(); }, wait);
}

async function refresh() {
  if (refreshing) { refreshAgain = true; return; }
  refreshing = true;
  lastRefresh = Date.now();
  try {
    setStatus(await api("GET", "/status"));
    render();
  } catch (e) {
    if (!(e instanceof APIError && e.status === 401)) setLive("off", "server unreachable");
  } finally {
    refreshing = false;
    if (refreshAgain) { refreshAgain = false; refreshSoon(); }
  }
}

// ---- the live stream: changes are queued and applied once per frame ----

const changeKinds = ["agent_state", "instance_state", "task_state", "event", "task_done", "escalated", "ui_request", "ui_ended",
  "spawn_progress", "model_drift", "sessions", "session_entries", "dropped", "change"];
let queue = [];
let flushScheduled = false;
let source = null;

function setLive(cls, text) {
  const el = $("live");
  el.className = "live " + cls;
  el.textContent = text;
}

function connect() {
  // deltas=1: a streamed update comes as its change to the worker's
  // update before it (streams below), not the whole message again.
  source = new EventSource("/v1/watch?deltas=1");
  source.onopen = () => { setLive("on", "live"); refreshSoon(0); };
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) {
      setLive("off", "disconnected");
      // Closed for good (the session ended, or the server is gone): try
      // once more later; a 401 there reloads to the login.
      setTimeout(() => { api("GET", "/status").then(() => connect(), () => setTimeout(connect, 5000)); }, 2000);
    } else {
      setLive("", "reconnecting…");
    }
  };
  for (const k of changeKinds) {
    source.addEventListener(k, (ev) => {
      queue.push(JSON.parse(ev.data));
      if (!flushScheduled) {
        flushScheduled = true;
        requestAnimationFrame(flush);
      }
    });
  }
}

// flush applies the queued changes: states move at once, worker events go
// to the open transcript, anything else asks for a fresh status (itself
// throttled), so a burst of a thousand changes costs one render.
function flush() {
  flushScheduled = false;
  const batch = queue;
  queue = [];
  let dirty = false, needStatus = false;
  const view = currentView();
  for (const c of batch) {
    switch (c.kind) {
      case "instance_state": {
        if (c.instanceId) {
          if (!timelines.has(c.instanceId) && c.from) note(c.instanceId, c.from);
          note(c.instanceId, c.to);
          dirty = true;
        }
        const i = model.byId.get(c.instanceId);
        if (i && c.to) { i.state = c.to; dirty = true; }
        needStatus = true;
        break;
      }
      case "agent_state": {
        const a = model.agentsByName.get(c.agent);
        if (a && c.to) { a.state = c.to; dirty = true; }
        needStatus = true;
        break;
      }
      case "event": {
        // Every worker's updates are followed (a delta reads against the
        // one before); only the open transcript shows them. What a worker
        // is doing comes with the next status, which a busy fleet asks
        // for at most every two seconds.
        const r = streams.event(c);
        if (r && r.ev && view.name === "worker" && view.id === c.instanceId) transcript.live(r.ev, r.appended);
        activitySeen = true;
        break;
      }
      case "ui_ended": {
        // The dialog ended without an answer (its time ran out): it is
        // no longer offered, even before the next status arrives.
        const i = model.byId.get(c.instanceId);
        const id = c.data && c.data.id;
        if (i && id && (i.pendingUi || []).some((u) => u.id === id)) {
          i.pendingUi = i.pendingUi.filter((u) => u.id !== id);
          dirty = true;
        }
        needStatus = true;
        break;
      }
      case "spawn_progress":
        if (c.message) $("sp-progress").textContent = c.message;
        needStatus = true;
        break;
      case "dropped":
        // The stream lost changes: the status is fetched again, and an
        // open transcript reloaded from the session.
        needStatus = true;
        if (view.name === "worker") transcript.load();
        break;
      default:
        needStatus = true;
    }
  }
  if (dirty) render();
  if (needStatus) refreshSoon();
  else if (activitySeen) { activitySeen = false; refreshSoon(2000); }
}
let activitySeen = false;

// ---- streamed updates ----

// The watch sends a worker's message_update as a delta when it changes
// the update of the same worker it sent just before (docs/control-api.md):
// {"u": the event without its partial message, "o": ops on that message,
// "r": step members to take from it}. Each op is [path, kind, …]: a path
// of member positions (in objects and arrays alike) from the message
// down; v sets the value there, k adds a member, a an element, s appends
// a string, d appends the step's delta. streams keeps each worker's
// partial message to apply them to; a delta it cannot apply drops the
// worker's until its next whole update (nothing is shown of it: the
// message itself comes whole at its end).
const streams = {
  partial: new Map(), // instance id → the partial message of its last update

  // event returns the worker event of change c, whole ({ev, appended}:
  // appended lists the strings a delta appended, each {target, key,
  // text}), or null.
  event(c) {
    const id = c.instanceId;
    const base = this.partial.get(id);
    this.partial.delete(id);
    if (c.delta === undefined) {
      const ev = c.data;
      if (ev && typeof ev === "object" && (ev.type === "message_start" || ev.type === "message_update") && isObject(ev.message)) this.partial.set(id, ev.message);
      return { ev, appended: null };
    }
    if (!base) return null;
    try {
      const r = applyDelta(base, c.delta);
      this.partial.set(id, r.ev.message);
      return r;
    } catch (_) {
      return null;
    }
  },
};

function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }

// put sets o's own member k ("__proto__" too, as JSON.parse makes it):
// never a setter, never o's prototype.
function put(o, k, v) {
  Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
}

// member returns the key (or index) of position p in container n.
function member(n, p) {
  if (!Number.isInteger(p) || p < 0) throw new Error("bad position");
  if (Array.isArray(n)) { if (p >= n.length) throw new Error("past the end"); return p; }
  if (!isObject(n)) throw new Error("path leaves the message");
  const keys = Object.keys(n);
  if (p >= keys.length) throw new Error("past the end");
  return keys[p];
}

// applyDelta applies delta d to the partial message m (changed in place,
// which no one reads any more) and returns the whole update.
function applyDelta(m, d) {
  if (!isObject(d) || !isObject(d.u) || !Array.isArray(d.o)) throw new Error("not a delta");
  const step = {};
  for (const k of Object.keys(d.u)) put(step, k, d.u[k]);
  const appended = [];
  for (const op of d.o) {
    if (!Array.isArray(op) || !Array.isArray(op[0])) throw new Error("bad op");
    const [path, kind] = op;
    let parent = null, key = null, n = m;
    for (const p of path) { key = member(n, p); parent = n; n = n[key]; }
    switch (kind) {
      case "v":
        if (parent === null) { if (!isObject(op[2])) throw new Error("not a message"); m = op[2]; } else put(parent, key, op[2]);
        break;
      case "k":
        if (!isObject(n) || typeof op[2] !== "string") throw new Error("bad k");
        put(n, op[2], op[3]);
        break;
      case "a":
        if (!Array.isArray(n)) throw new Error("bad a");
        n.push(op[2]);
        break;
      case "s":
      case "d": {
        const text = kind === "s" ? op[2] : step.delta;
        if (parent === null || typeof n !== "string" || typeof text !== "string") throw new Error("bad append");
        put(parent, key, n + text);
        appended.push({ target: parent, key, text });
        break;
      }
      default:
        throw new Error("unknown op");
    }
  }
  for (const ref of d.r || []) {
    if (!Array.isArray(ref) || !Array.isArray(ref[1])) throw new Error("bad reference");
    let n = m;
    for (const p of ref[1]) n = n[member(n, p)];
    put(step, member(d.u, ref[0]), n);
  }
  return { ev: { type: "message_update", assistantMessageEvent: Object.assign(step, { partial: m }), message: m }, appended };
}

// ---- views ----

function currentView() {
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  const name = parts[0] || "workers";
  return { name, id: parts[1] ? decodeURIComponent(parts[1]) : "" };
}

function render() {
  const v = currentView();
  for (const s of document.querySelectorAll(".view")) s.hidden = true;
  const viewEl = $("view-" + v.name) || $("view-workers");
  viewEl.hidden = false;
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.view === v.name || (v.name === "worker" && a.dataset.view === "workers"));
  }
  const st = model.status;
  const live = st.instances.filter((i) => !finalStates.has(i.state));
  $("count-workers").textContent = live.length || "";
  const reviews = st.tasks.filter((t) => t.state === "awaiting_review" || t.state === "escalated");
  $("count-review").textContent = reviews.length || "";
  $("count-agents").textContent = st.agents.length || "";
  switch (v.name) {
    case "worker": renderWorker(v.id); break;
    case "review": renderReviews(reviews); break;
    case "agents": renderAgents(); break;
    case "sessions": break; // loaded on entry and on demand
    default: renderCards();
  }
}

// ---- worker cards: one per instance, rebuilt only when what it shows changed ----

const cardCache = new Map();

function renderCards() {
  const filter = $("filter").value.trim().toLowerCase();
  const showEnded = $("show-ended").checked;
  const list = model.status.instances.filter((i) => {
    if (!showEnded && finalStates.has(i.state)) return false;
    if (!filter) return true;
    return [i.id, i.agent, i.state, i.cwd, i.bundle, i.activity].some((s) => (s || "").toLowerCase().includes(filter));
  });
  const cards = $("cards");
  const keep = new Set();
  let prev = null;
  for (const [key, sp] of spawning) {
    keep.add(key);
    const sig = JSON.stringify(sp);
    let c = cardCache.get(key);
    if (!c || c.sig !== sig) {
      const el = pendingCard(key, sp);
      if (c) c.el.replaceWith(el);
      c = { el, sig };
      cardCache.set(key, c);
    }
    const want = prev ? prev.nextSibling : cards.firstChild;
    if (want !== c.el) cards.insertBefore(c.el, want);
    prev = c.el;
  }
  for (const inst of list) {
    keep.add(inst.id);
    const tl = timelines.get(inst.id);
    const sig = JSON.stringify(inst) + policyOf(inst.agent) + (tl ? tl.length + tl[tl.length - 1].state : "");
    let c = cardCache.get(inst.id);
    if (!c || c.sig !== sig) {
      const el = card(inst);
      if (c) c.el.replaceWith(el);
      c = { el, sig };
      cardCache.set(inst.id, c);
    }
    const want = prev ? prev.nextSibling : cards.firstChild;
    if (want !== c.el) cards.insertBefore(c.el, want);
    prev = c.el;
  }
  for (const [id, c] of cardCache) {
    if (!keep.has(id)) { c.el.remove(); cardCache.delete(id); }
  }
  cards.classList.toggle("big", list.length > 60);
  $("no-workers").hidden = list.length > 0 || spawning.size > 0 || !model.loaded;
}

function pendingCard(key, sp) {
  return h("article", { class: "card pending", dataset: { spawn: key } },
    h("div", { class: "card-head" }, h("span", { class: "card-title" }, "new worker"), badge(sp.state)),
    h("dl", { class: "facts" },
      h("dt", {}, "agent"), h("dd", {}, sp.agent),
      h("dt", {}, "cwd"), h("dd", { class: "mono" }, sp.cwd),
      h("dt", {}, "bundle"), h("dd", {}, sp.bundle)),
    h("div", { class: "activity" }, sp.message || ""),
    historyLine(sp.history),
    sp.state === "failed" ? h("div", { class: "card-actions" }, h("button", { onclick: () => { spawning.delete(key); renderCards(); } }, "Dismiss")) : null);
}

function task(id) { return model.status.tasks.find((t) => t.id === id); }

function card(inst) {
  const steer = canSteer(inst.agent);
  const ended = finalStates.has(inst.state);
  const t = inst.openTask ? task(inst.openTask) : null;
  const attention = inst.state === "awaiting_review" || inst.state === "escalated" || (inst.pendingUi || []).length > 0;
  const model_ = inst.model ? inst.model.provider + "/" + inst.model.id : "bundle default";
  return h("article", { class: "card" + (ended ? " ended" : "") + (attention ? " attention" : ""), dataset: { instance: inst.id } },
    h("div", { class: "card-head" },
      h("a", { class: "card-title", href: "#/worker/" + seg(inst.id), title: inst.id }, inst.id),
      badge(inst.state, inst.endReason)),
    h("dl", { class: "facts" },
      h("dt", {}, "agent"), h("dd", {}, inst.agent),
      h("dt", {}, "cwd"), h("dd", { class: "mono" }, inst.cwd),
      h("dt", {}, "bundle"), h("dd", {}, inst.bundle, inst.degraded ? " (cached copy)" : ""),
      h("dt", {}, "model"), h("dd", {}, model_),
      spend(inst),
      t ? [h("dt", {}, "task"), h("dd", {}, badge(t.state), " ", short(t.prompt, 60))] : null),
    h("div", { class: "activity" }, inst.activity ? ["doing ", h("b", {}, inst.activity), " · ", h("span", { class: "ago", dataset: { at: inst.activityAt || "" } }, ago(inst.activityAt))]
      : ended ? inst.endReason || "ended" : "no activity yet"),
    historyLine(timelines.get(inst.id)),
    (inst.pendingUi || []).map((u) => dialogBox(u, inst)),
    ended ? null : h("div", { class: "card-actions" },
      h("button", { onclick: () => { location.hash = "#/worker/" + seg(inst.id); } }, "Open"),
      h("button", { disabled: !steer || inst.state !== "running", title: steer ? "" : "the machine's trust policy does not allow steering",
        onclick: (e) => act(e.target, () => api("POST", "/instances/" + seg(inst.id) + "/abort"), "abort sent") }, "Abort"),
      h("button", { class: "danger", disabled: !canStop(inst.agent), title: canStop(inst.agent) ? "" : "the machine's trust policy does not allow stopping",
        onclick: (e) => confirm("Stop worker " + inst.id + "?") && act(e.target, () => api("POST", "/instances/" + seg(inst.id) + "/stop"), inst.id + " stopped") }, "Stop")));
}

// spend is the cost and turns of a worker against its budget: a meter
// where the bundle (or the spawn) sets a bound.
function spend(inst) {
  const b = inst.budget || {};
  const meter = (used, max) => {
    if (!max) return null;
    const pct = Math.min(100, (used / max) * 100);
    const bar = h("span", {});
    bar.style.width = pct.toFixed(1) + "%";
    return h("div", { class: "meter" + (used >= max ? " over" : ""), title: Math.round(pct) + "% of the budget" }, bar);
  };
  const cost = "$" + (inst.cost || 0).toFixed(4) + (b.maxCost ? " of $" + b.maxCost.toFixed(2) + " a run" : "");
  const turns = (inst.turns || 0) + (b.maxTurns ? " of " + b.maxTurns : "") + " this run";
  return [h("dt", {}, "cost"), h("dd", {}, cost, meter(inst.cost || 0, b.maxCost)),
    h("dt", {}, "turns"), h("dd", {}, turns, meter(inst.turns || 0, b.maxTurns))];
}

// dialogBox renders a pending worker dialog with its answers.
function dialogBox(u, inst) {
  const answer = (value) => (e) => act(e.target, () => api("POST", "/ui/" + seg(u.id), { value }), "answered");
  const allowed = canSteer(inst.agent);
  let controls;
  if (u.kind === "confirm") {
    controls = [h("button", { class: "primary", onclick: answer(true), disabled: !allowed }, "Yes"),
      h("button", { onclick: answer(false), disabled: !allowed }, "No")];
  } else if (u.kind === "select") {
    controls = (u.options || []).map((o) => h("button", { onclick: answer(o), disabled: !allowed }, o));
  } else {
    const inp = h("input", { placeholder: "answer", "aria-label": "answer" });
    controls = [inp, h("button", { class: "primary", disabled: !allowed, onclick: (e) => answer(inp.value)(e) }, "Send")];
  }
  return h("div", { class: "dialog-box", dataset: { ui: u.id } },
    h("div", { class: "q" }, u.title || "The worker asks"),
    u.message ? h("div", { class: "text" }, u.message) : null,
    h("div", { class: "row" }, controls, h("button", { class: "ghost", onclick: answer(null), disabled: !allowed }, "Cancel")));
}

// ---- one worker: facts, actions, diagram, transcript ----

let openWorker = "";

function renderWorker(id) {
  const inst = model.byId.get(id);
  if (openWorker !== id) {
    openWorker = id;
    transcript.open(id);
    $("w-text").value = "";
  }
  $("w-title").textContent = id;
  if (!inst) {
    replace($("w-state"), model.loaded ? "unknown worker" : "");
    return;
  }
  replace($("w-state"), badge(inst.state, inst.endReason));
  const t = inst.openTask ? task(inst.openTask) : null;
  replace($("w-facts"), h("h3", {}, "Worker"), h("dl", { class: "facts" },
    h("dt", {}, "agent"), h("dd", {}, inst.agent, " ", h("span", { class: "policy p-" + policyOf(inst.agent) }, policyOf(inst.agent))),
    h("dt", {}, "cwd"), h("dd", { class: "mono" }, inst.cwd),
    h("dt", {}, "bundle"), h("dd", {}, inst.bundle, inst.bundleHash ? " · " + inst.bundleHash.slice(0, 12) : "", inst.degraded ? " (cached copy)" : ""),
    h("dt", {}, "model"), h("dd", {}, inst.model ? inst.model.provider + "/" + inst.model.id : "bundle default"),
    spend(inst),
    h("dt", {}, "activity"), h("dd", {}, inst.activity ? inst.activity + " · " + ago(inst.activityAt) : "—"),
    t ? [h("dt", {}, "task"), h("dd", {}, h("a", { href: "#/review" }, t.id), " ", badge(t.state), " ", t.rejects + "/" + t.maxRejects + " rejections")] : null,
    inst.session ? [h("dt", {}, "session"), h("dd", { class: "mono" }, inst.session)] : null,
    inst.fromSession ? [h("dt", {}, "from"), h("dd", { class: "mono" }, inst.fromSession, " (" + (inst.sessionMode || "clone") + ")", inst.staleBaseline ? " — baseline is stale" : "")] : null,
    inst.endReason ? [h("dt", {}, "ended"), h("dd", {}, inst.endReason)] : null,
    timelines.has(inst.id) ? [h("dt", {}, "history"), h("dd", { id: "w-history" }, historyLine(timelines.get(inst.id)) || inst.state)] : null));
  const steer = canSteer(inst.agent);
  const ended = finalStates.has(inst.state);
  for (const b of ["w-send", "w-steer", "w-abort"]) $(b).disabled = !steer || ended;
  $("w-stop").disabled = !canStop(inst.agent) || ended;
  $("w-abort").disabled ||= inst.state !== "running";
  $("w-steer").disabled ||= inst.state !== "running";
  const hint = $("w-policy-hint");
  hint.hidden = steer;
  hint.textContent = "The trust policy of " + inst.agent + " is " + policyOf(inst.agent) + (canStop(inst.agent) ? ": this page may watch and stop its workers but not prompt or steer them." : ": this page may watch its workers but not prompt, steer or stop them.");
  // Rebuilt only when the dialogs change, so an answer being typed stays.
  const dialogs = JSON.stringify([inst.pendingUi || [], steer]);
  if ($("w-dialogs").dataset.sig !== dialogs) {
    $("w-dialogs").dataset.sig = dialogs;
    replace($("w-dialogs"), (inst.pendingUi || []).map((u) => dialogBox(u, inst)));
  }
  showDiagram($("w-diagram"), "svg-instance", inst.state, "instance", $("w-ways"));
}

// showDiagram puts the pre-rendered drawing into box once and highlights
// state and the transitions out of it.
function showDiagram(box, templateId, state, machine, ways) {
  if (!box.firstElementChild) box.append($(templateId).content.cloneNode(true));
  const svg = box.querySelector("svg");
  const out = transitions[machine][state] || [];
  const next = new Set(out.map((x) => x[1]));
  for (const g of svg.querySelectorAll(".st")) {
    g.classList.toggle("current", g.dataset.state === state);
    g.classList.toggle("next", next.has(g.dataset.state));
  }
  for (const p of svg.querySelectorAll(".tr")) p.classList.toggle("out", p.dataset.src === state);
  if (ways) {
    replace(ways, out.length ? out.map(([ev, dst]) => h("li", {}, h("code", {}, ev), " → ", dst)) : h("li", {}, "a final state: nothing follows"));
  }
}

// ---- the transcript: entries from the session mirror, then live events ----

const transcript = {
  id: "",
  limit: 200,
  seen: new Set(),
  tools: new Map(),
  streaming: null,
  streamNode: null, // the streaming message's text
  placeholder: null,

  open(id) {
    this.id = id;
    this.limit = 200;
    this.load();
  },

  reset() {
    this.seen = new Set();
    this.tools = new Map();
    this.streaming = null;
    this.placeholder = null;
    $("w-transcript").replaceChildren();
  },

  async load() {
    const id = this.id;
    let entries = null, events = null;
    try {
      const t = await api("GET", "/instances/" + seg(id) + "/transcript?limit=" + this.limit);
      entries = t.entries || [];
      $("w-older").hidden = !t.truncated;
    } catch (_) {
      $("w-older").hidden = true;
    }
    try {
      events = (await api("GET", "/instances/" + seg(id) + "/output")).tail || [];
    } catch (_) { events = []; }
    if (this.id !== id) return;
    this.reset();
    for (const e of entries || []) this.entry(e);
    for (const ev of events) this.live(ev);
    if (!$("w-transcript").firstChild) this.placeholder = this.add("info", "", "Nothing yet: the worker's messages appear here as it writes them.");
  },

  add(kind, who, ...body) {
    if (this.placeholder) { this.placeholder.remove(); this.placeholder = null; }
    const li = h("li", { class: kind }, who ? h("div", { class: "who" }, who) : null, body);
    $("w-transcript").append(li);
    return li;
  },

  key(msg) { return msg.role + ":" + (msg.timestamp || "") + ":" + (msg.responseId || ""); },

  // message renders one whole message (from a session entry or a
  // message_end event); each is shown once.
  message(msg) {
    if (!msg || typeof msg !== "object") return;
    if (msg.timestamp) {
      const k = this.key(msg);
      if (this.seen.has(k)) return;
      this.seen.add(k);
    }
    const content = typeof msg.content === "string" ? [{ type: "text", text: msg.content }] : msg.content || [];
    if (msg.role === "user") {
      this.add("user", "prompt", h("div", { class: "text" }, content.filter((c) => c.type === "text").map((c) => c.text).join("\n")));
    } else if (msg.role === "assistant") {
      if (this.streaming) { this.streaming.remove(); this.streaming = null; }
      for (const c of content) {
        if (c.type === "text" && c.text) this.add("assistant", "assistant", h("div", { class: "text" }, c.text));
        else if (c.type === "thinking" && c.thinking) this.add("assistant", "", h("details", {}, h("summary", {}, "thinking"), h("div", { class: "text muted" }, c.thinking)));
        else if (c.type === "toolCall") this.tool(c.id, c.name, c.arguments);
      }
      if (msg.stopReason === "error" || msg.errorMessage) this.add("error", "error", h("div", { class: "text" }, msg.errorMessage || "the model answered with an error"));
      if (msg.stopReason === "aborted") this.add("info", "", "run aborted");
    } else if (msg.role === "toolResult") {
      this.result(msg.toolCallId, msg.toolName, { content: msg.content }, msg.isError);
    } else if (msg.role === "bashExecution") {
      this.add("tool", "shell", h("pre", {}, "$ " + (msg.command || "") + "\n" + (msg.output || "")));
    }
  },

  tool(id, name, args) {
    if (id && this.tools.has(id)) return this.tools.get(id);
    const res = h("div", { class: "result muted" }, "running…");
    const li = this.add("tool", "", h("div", {}, "tool ", h("span", { class: "tool-name" }, name || "?")),
      h("details", {}, h("summary", {}, "arguments"), h("pre", {}, pretty(args))), res);
    const t = { li, res };
    if (id) this.tools.set(id, t);
    return t;
  },

  result(id, name, result, isError) {
    const t = this.tools.get(id) || this.tool(id, name, undefined);
    const text = textOf(result && result.content);
    t.li.classList.toggle("failed", !!isError);
    replace(t.res, h("details", { open: isError || text.length < 400 ? true : undefined },
      h("summary", {}, isError ? "failed" : "result"), h("pre", {}, text || "(no output)")));
  },

  // entry renders a session file entry.
  entry(e) {
    if (!e || typeof e !== "object") return;
    switch (e.type) {
      case "message": this.message(e.message); break;
      case "compaction": this.add("info", "", "context compacted"); break;
      case "model_change": this.add("info", "", "model " + (e.provider || "") + "/" + (e.modelId || "")); break;
      case "custom_message": if (e.display) this.add("info", "", textOf(e.content)); break;
    }
  },

  // live renders a worker event as it arrives (appended: what a delta
  // appended to its partial message, see streams).
  live(ev, appended) {
    if (!ev || typeof ev !== "object") return;
    switch (ev.type) {
      case "message_end": this.message(ev.message); break;
      case "message_update": this.partial(ev, appended); break;
      case "tool_execution_start": this.tool(ev.toolCallId, ev.toolName, ev.args); break;
      case "tool_execution_end": this.result(ev.toolCallId, ev.toolName, ev.result, ev.isError); break;
      case "auto_retry_start": this.add("info", "", "retrying (" + ev.attempt + "/" + ev.maxAttempts + "): " + (ev.errorMessage || "")); break;
      case "extension_error": this.add("error", "extension error", h("div", { class: "text" }, String(ev.error || ""))); break;
      case "compaction_end": this.add("info", "", ev.aborted ? "compaction aborted" : "context compacted"); break;
    }
    const list = $("w-transcript");
    const nearBottom = list.getBoundingClientRect().bottom - window.innerHeight < 200;
    if (nearBottom) window.scrollTo(0, document.body.scrollHeight);
  },

  // partial shows the assistant's message while it streams: its text
  // blocks, joined. What a delta appended to the last of them is appended
  // to the text node shown (O(chunk)); anything else writes the text
  // again.
  partial(ev, appended) {
    const m = ev.message;
    let text = "", blocks = null;
    if (m && Array.isArray(m.content)) {
      blocks = m.content.filter((c) => isObject(c) && c.type === "text" && typeof c.text === "string");
    } else if (ev.assistantMessageEvent && ev.assistantMessageEvent.delta && ev.assistantMessageEvent.type === "text_delta") {
      text = (this.streaming ? this.streamNode.data : "") + ev.assistantMessageEvent.delta;
    }
    if (blocks && appended && this.streaming) {
      const last = blocks[blocks.length - 1];
      let want = 0, added = 0;
      for (const b of blocks) want += b.text.length;
      for (const a of appended) added += a.text.length;
      if (appended.every((a) => a.target === last && a.key === "text") && this.streamNode.length + added === want) {
        for (const a of appended) this.streamNode.appendData(a.text);
        return;
      }
    }
    if (blocks) text = blocks.map((c) => c.text).join("");
    if (!text) return;
    if (!this.streaming) {
      this.streamNode = document.createTextNode("");
      this.streaming = this.add("assistant streaming", "assistant", h("div", { class: "text" }, this.streamNode));
    }
    this.streamNode.data = text;
  },
};

function textOf(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((c) => (c.type === "text" ? c.text : c.type === "image" ? "[image]" : "")).join("\n");
}
function pretty(v) {
  if (v === undefined) return "";
  try { return JSON.stringify(v, null, 2); } catch (_) { return String(v); }
}

// ---- review ----

const diffs = new Map(); // instance id → {text, at}
const reviewCache = new Map();

function renderReviews(reviews) {
  const box = $("reviews");
  $("no-reviews").hidden = reviews.length > 0 || !model.loaded;
  const keep = new Set();
  let prev = null;
  for (const t of reviews) {
    keep.add(t.id);
    const sig = JSON.stringify([t, policyOf(t.agent)]);
    let c = reviewCache.get(t.id);
    if (!c || c.sig !== sig) {
      const el = reviewCard(t);
      if (c) c.el.replaceWith(el);
      c = { el, sig };
      reviewCache.set(t.id, c);
    }
    const want = prev ? prev.nextSibling : box.firstChild;
    if (want !== c.el) box.insertBefore(c.el, want);
    prev = c.el;
  }
  for (const [id, c] of reviewCache) if (!keep.has(id)) { c.el.remove(); reviewCache.delete(id); }
}

function reviewCard(t) {
  const agent = t.agent || (model.byId.get(t.instanceId) || {}).agent;
  const allowed = canSteer(agent);
  const feedback = h("textarea", { rows: 3, placeholder: "What should the worker change?", "aria-label": "feedback", class: "feedback" });
  const disposition = h("select", { "aria-label": "after accepting", class: "disposition" },
    h("option", { value: "keep_idle" }, "keep the worker idle"), h("option", { value: "stop" }, "stop the worker"));
  const diffBox = h("div", { class: "diff-box" }, h("p", { class: "muted" }, "loading the diff…"));
  // A task on its own branch (an isolated worker) is reviewed against the
  // commit it started from; otherwise the working tree against HEAD.
  loadDiff(t.branch ? "/tasks/" + seg(t.id) + "/diff" : "/instances/" + seg(t.instanceId) + "/diff", diffBox);
  // An isolated task's work can be delivered with the accept.
  const deliver = h("select", { "aria-label": "deliver the work", class: "deliver" },
    h("option", { value: "" }, "leave the work on its branch as it is"),
    h("option", { value: "branch" }, "commit it to " + (t.branch || "its branch")),
    h("option", { value: "merge" }, "commit it and merge it into…"));
  const target = h("input", { class: "target", placeholder: "target branch (default: the one it started from)", "aria-label": "merge target", hidden: true });
  deliver.addEventListener("change", () => { target.hidden = deliver.value !== "merge"; });
  const acceptBody = () => {
    const b = { disposition: disposition.value };
    if (t.branch && deliver.value) {
      b.deliver = deliver.value;
      if (deliver.value === "merge" && target.value.trim()) b.target = target.value.trim();
    }
    return b;
  };
  const stat = t.diffStat ? t.diffStat.files + " files, +" + t.diffStat.insertions + " −" + t.diffStat.deletions : "";
  const last = (t.lastDone && (t.lastDone.lastAssistantMessage || t.lastDone.summary)) || "";
  return h("article", { class: "panel review", dataset: { task: t.id } },
    h("div", { class: "review-head" }, h("h3", {}, t.id), badge(t.state),
      h("span", { class: "muted" }, "worker ", h("a", { href: "#/worker/" + seg(t.instanceId) }, t.instanceId), " on ", agent || "?",
        " · ", t.rejects + "/" + t.maxRejects + " rejections")),
    t.state === "escalated" ? h("p", { class: "hint" }, "Rejected more often than the bundle allows: a human decides. Accept, or reject once more with feedback.") : null,
    h("div", { class: "prompt" }, t.prompt || ""),
    (t.feedback || []).length ? h("ol", { class: "feedback-list" }, t.feedback.map((f) => h("li", {}, f.text))) : null,
    h("div", {}, h("div", { class: "who muted" }, "last message"), h("div", { class: "last" }, last || "(none)")),
    h("details", { open: true }, h("summary", {}, t.branch ? "Changes on " + t.branch + " since " + (t.base ? t.base.slice(0, 10) : "its base") : "Changes in the working tree",
      stat ? h("span", { class: "muted" }, " · " + stat) : null), diffBox),
    h("div", { class: "review-actions" },
      h("div", { class: "stack" }, disposition, t.branch ? [deliver, target] : null,
        h("button", { class: "primary accept", disabled: !allowed,
          onclick: (e) => act(e.target, () => api("POST", "/tasks/" + seg(t.id) + "/accept", acceptBody()), t.id + " accepted") }, "Accept")),
      h("div", { class: "stack" }, feedback,
        h("button", { class: "reject", disabled: !allowed, onclick: (e) => {
          if (!feedback.value.trim()) { toast("Write the feedback first.", true); feedback.focus(); return; }
          act(e.target, async () => {
            const r = await api("POST", "/tasks/" + seg(t.id) + "/reject", { feedback: feedback.value });
            if (r && r.escalated) toast(t.id + " escalated: it exceeded the bundle's rejections");
            return r;
          }, t.id + " sent back");
        } }, "Reject with feedback"))),
    allowed ? null : h("p", { class: "hint" }, "The trust policy of " + agent + " does not let this page review its workers."));
}

// loadDiff shows the worker's diff: of its working tree, or of its task's
// branch against the base it started from.
async function loadDiff(path, box) {
  let text, r;
  try {
    r = await api("GET", path);
    text = typeof r === "string" ? r : (r && (r.text ?? r.diff)) || "";
  } catch (e) {
    replace(box, h("p", { class: "muted" }, "No diff: " + e.message));
    return;
  }
  replace(box, renderDiff(text), r && r.truncated ? h("p", { class: "hint" }, "The agent cut the diff at its size limit.") : null);
}

function renderDiff(text) {
  if (!text.trim()) return h("p", { class: "muted" }, "No changes in the working tree.");
  const out = h("div", { class: "diff" });
  for (const line of text.split("\n")) {
    let cls = "";
    if (line.startsWith("diff --git") || line.startsWith("+++ ") || line.startsWith("--- ")) cls = "file";
    else if (line.startsWith("@@")) cls = "hunk";
    else if (line.startsWith("+")) cls = "add";
    else if (line.startsWith("-")) cls = "del";
    out.append(h("div", { class: cls }, line));
  }
  return out;
}

// ---- agents ----

const cacheHealth = new Map(); // agent → {result, detail}

function renderAgents() {
  const counts = new Map();
  for (const i of model.status.instances) if (!finalStates.has(i.state)) counts.set(i.agent, (counts.get(i.agent) || 0) + 1);
  replace($("agents"), model.status.agents.map((a) => {
    const lost = a.state === "lost" || a.state === "closed" || a.state === "rejected";
    const cache = cacheHealth.get(a.name);
    return h("tr", { class: lost ? "lost" : "", dataset: { agent: a.name } },
      h("td", {}, h("b", {}, a.name), a.machine && a.machine !== a.name ? h("div", { class: "muted" }, a.machine) : null),
      h("td", {}, badge(a.state), lost && a.lostAt ? h("span", { class: "err" }, "lost " + ago(a.lostAt)) : null,
        a.lastError ? h("span", { class: "err" }, short(a.lastError, 120)) : null),
      h("td", {}, a.platform || "—", a.version ? h("div", { class: "muted" }, a.version) : null),
      h("td", { class: "workers" }, String(counts.get(a.name) || 0) + (a.maxWorkers ? " / " + a.maxWorkers : "")),
      h("td", {}, h("span", { class: "policy p-" + (a.policy || "none") }, a.policy || "undecided")),
      h("td", {}, cache ? [badge(cache.result === "pass" ? "intact" : cache.result === "fail" ? "damaged" : "unchecked"),
        cache.detail ? h("span", { class: cache.result === "fail" ? "err" : "muted" }, short(cache.detail, 140)) : null] : h("span", { class: "muted" }, "not checked")),
      h("td", { class: "mono" }, a.addr || (a.addresses || []).join(", ")),
      h("td", {}, a.connectedAt && !lost ? ago(a.connectedAt) : "—"));
  }));
  const last = model.status.agents.find((a) => a.state !== "established");
  showDiagram($("agent-diagram"), "svg-agent", last ? last.state : "established", "agent", null);
}

async function checkCaches(e) {
  await act(e.target, async () => {
    const rep = await api("GET", "/doctor");
    for (const c of rep.checks || []) {
      const m = /^bundle cache on (.+)$/.exec(c.name);
      if (m) cacheHealth.set(m[1], c);
    }
    $("doctor-at").textContent = "checked " + new Date().toLocaleTimeString();
  });
  renderAgents();
}

// ---- sessions ----

async function loadSessions() {
  const kind = $("kind").value;
  let list = [];
  try { list = await api("GET", "/sessions" + (kind ? "?kind=" + seg(kind) : "")); } catch (e) { toast(e.message, true); }
  replace($("sessions"), list.length ? list.map(sessionRow) : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No sessions.")));
}

function resumeButtons(ref, machine, pinned) {
  const resume = (mode) => (e) => act(e.target, async () => {
    const r = await spawnLike("/sessions/resume", { session: ref, machine, mode }, () => {});
    location.hash = "#/worker/" + seg(r.instanceId);
  }, "worker started");
  return [h("button", { onclick: resume("clone"), title: "a new worker continues in a copy of the session" }, "Resume"),
    pinned ? null : h("button", { class: "ghost", onclick: resume("attach"), title: "the worker appends to this very session" }, "Attach")];
}

function sessionRow(s) {
  return h("tr", {},
    h("td", {}, h("b", {}, s.name || s.sessionId.slice(0, 8)), s.staleBaseline ? h("span", { class: "err" }, "stale: the repository moved on") : null,
      s.attachedInstanceId ? h("div", { class: "muted" }, "written by ", h("a", { href: "#/worker/" + seg(s.attachedInstanceId) }, s.attachedInstanceId)) : null),
    h("td", {}, s.machine), h("td", {}, s.kind, s.pinned ? " · pinned" : ""),
    h("td", { class: "mono" }, s.cwd), h("td", {}, ago(s.updatedAt)),
    h("td", {}, h("div", { class: "row" }, resumeButtons(s.path, s.machine, s.pinned))));
}

async function search(ev) {
  ev.preventDefault();
  const q = $("search-q").value.trim();
  if (!q) return;
  await act(null, async () => {
    const r = await api("GET", "/sessions/search?q=" + seg(q));
    replace($("hits"), (r.hits || []).length ? r.hits.map((hit) => h("div", { class: "hit" },
      h("span", { class: "muted" }, hit.machine), h("span", { class: "snip" }, hit.snippet), resumeButtons(hit.path, hit.machine, false)))
      : h("p", { class: "muted" }, "No session mentions that."),
    (r.failed || []).map((f) => h("p", { class: "hint" }, f.machine + " could not be searched: " + f.error.message)));
  });
}

// ---- spawn and baseline dialogs ----

function agentOptions(select) {
  const keep = select.value;
  replace(select, model.status.agents.map((a) => h("option", { value: a.name, disabled: a.state !== "established" || a.policy === "deny" ? true : undefined },
    a.name + (a.state !== "established" ? " (" + a.state + ")" : ""))));
  if (keep) select.value = keep;
  else { const first = [...select.options].find((o) => !o.disabled); if (first) select.value = first.value; }
}

function openSpawn() {
  agentOptions($("sp-agent"));
  $("sp-progress").textContent = "";
  $("spawn-dialog").showModal();
}

async function spawnSubmit(ev) {
  ev.preventDefault();
  const body = { agent: $("sp-agent").value, cwd: $("sp-cwd").value.trim(), bundle: $("sp-bundle").value.trim() };
  const m = $("sp-model").value.trim();
  if (m) {
    const i = m.indexOf("/");
    if (i <= 0) { toast("The model is provider/id.", true); return; }
    body.model = { provider: m.slice(0, i), id: m.slice(i + 1) };
  }
  const from = $("sp-from").value.trim();
  if (from) body.fromSession = from;
  if ($("sp-isolate").checked) body.isolation = {};
  // The dialog closes at once; the new worker's card shows the spawn.
  $("spawn-dialog").close();
  const key = "spawn-" + ++spawnSeq;
  const sp = { agent: body.agent || "(from the session)", cwd: body.cwd || from, bundle: body.bundle, state: "requested", message: "", history: [] };
  const move = (state) => {
    sp.state = state;
    if (!sp.history.length || sp.history[sp.history.length - 1].state !== state) sp.history.push({ state, at: Date.now() });
  };
  move("requested");
  spawning.set(key, sp);
  if (currentView().name !== "workers") location.hash = "#/workers";
  renderCards();
  try {
    const r = await spawnLike("/instances", body, (p) => {
      move(phaseState[p.phase] || sp.state);
      sp.message = p.phase + (p.filesTotal ? " · " + ((p.filesFetched || 0) + (p.filesReused || 0)) + "/" + p.filesTotal + " files" : "") + (p.message ? " · " + p.message : "");
      renderCards();
    });
    move("idle"); // a spawn answers once the worker is idle
    // The stream saw the end of it too (… → idle, and maybe more since):
    // keep what came after its idle.
    const seen = timelines.get(r.instanceId) || [];
    const after = seen.findIndex((x) => x.state === "idle");
    timelines.set(r.instanceId, sp.history.concat(after >= 0 ? seen.slice(after + 1) : []));
    spawning.delete(key);
    toast(r.instanceId + " is ready");
    await refresh();
  } catch (e) {
    move("failed");
    sp.message = e.message;
    toast(e.message, true);
    renderCards();
  }
}

async function baselineSubmit(ev) {
  ev.preventDefault();
  const body = { agent: $("bl-agent").value, cwd: $("bl-cwd").value.trim(), bundle: $("bl-bundle").value.trim() };
  if ($("bl-repo").value.trim()) body.repo = $("bl-repo").value.trim();
  if ($("bl-prompt").value.trim()) body.prompt = $("bl-prompt").value.trim();
  $("baseline-dialog").close();
  toast("Priming the baseline: this takes as long as the worker explores.");
  const b = await act(null, () => api("POST", "/baselines", body));
  if (b) { toast(b.name + " is ready"); loadSessions(); }
}

// ---- the worker's prompt box ----

function workerAction(kind) {
  return (ev) => {
    if (ev) ev.preventDefault();
    const id = openWorker;
    const text = $("w-text").value;
    const btn = { prompt: $("w-send"), steer: $("w-steer"), abort: $("w-abort"), stop: $("w-stop") }[kind];
    if ((kind === "prompt" || kind === "steer") && !text.trim()) { $("w-text").focus(); return; }
    if (kind === "stop" && !confirm("Stop worker " + id + "?")) return;
    const path = "/instances/" + seg(id) + "/" + kind;
    const body = kind === "prompt" ? { text, task: $("w-task").checked } : kind === "steer" ? { text } : undefined;
    act(btn, async () => {
      const r = await api("POST", path, body);
      if (kind === "prompt" || kind === "steer") $("w-text").value = "";
      return r;
    }, { prompt: "prompt sent", steer: "steering message queued", abort: "abort sent", stop: id + " stopped" }[kind]);
  };
}

// ---- wiring ----

function wire() {
  window.addEventListener("hashchange", () => { render(); if (currentView().name === "sessions") loadSessions(); window.scrollTo(0, 0); });
  $("filter").addEventListener("input", renderCards);
  $("show-ended").addEventListener("change", renderCards);
  $("spawn-open").addEventListener("click", openSpawn);
  document.querySelector('[data-action="spawn-open"]').addEventListener("click", openSpawn);
  $("spawn-form").addEventListener("submit", spawnSubmit);
  $("baseline-open").addEventListener("click", () => { agentOptions($("bl-agent")); $("baseline-dialog").showModal(); });
  $("baseline-form").addEventListener("submit", baselineSubmit);
  for (const b of document.querySelectorAll("[data-close]")) b.addEventListener("click", (e) => e.target.closest("dialog").close());
  $("w-prompt-form").addEventListener("submit", workerAction("prompt"));
  $("w-steer").addEventListener("click", workerAction("steer"));
  $("w-abort").addEventListener("click", workerAction("abort"));
  $("w-stop").addEventListener("click", workerAction("stop"));
  $("w-older").addEventListener("click", () => { transcript.limit *= 4; transcript.load(); });
  $("check-caches").addEventListener("click", checkCaches);
  $("search-form").addEventListener("submit", search);
  $("kind").addEventListener("change", loadSessions);
  $("logout").addEventListener("click", async () => {
    await fetch("/logout", { method: "POST", headers: { "X-CSRF-Token": csrf }, credentials: "same-origin" });
    location.reload();
  });
  // Relative times: the texts are updated in place every 10 s (a card is
  // not rebuilt for it, so nothing typed into it is lost).
  setInterval(() => {
    for (const el of document.querySelectorAll(".ago[data-at]")) el.textContent = ago(el.dataset.at);
    if (currentView().name === "agents") renderAgents();
  }, 10000);
}

wire();
connect();
refresh().then(() => { if (currentView().name === "sessions") loadSessions(); });
