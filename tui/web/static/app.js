// The page of `tui web`: the sessions, and one session followed live.
//
// Everything a program or an agent says reaches the page as text nodes (textContent), or through
// renderMarkdown (md.js), which makes only allow-listed elements; nothing here uses innerHTML.
// Every request carries the cookie and, as its X-Tui-Page header, the page secret sign-in gave
// (pageHeaders): the bridge honours the cookie only with it. The secret is kept in sessionStorage,
// which belongs to this origin (port included) and this tab: another local server the browser
// opens gets the cookie (cookies ignore the port) but never the secret. A reload keeps it; a new
// tab signs in again. The session is followed with fetch() reading the SSE stream (EventSource
// cannot send that header), resumed with Last-Event-ID from the last event applied, so nothing is missed or
// applied twice across dropped connections, a worker's restart or a restart of `tui web`.
// The state kept here mirrors tui/protocol/state.py's reducer for what the page shows.
"use strict";

const $ = (sel) => document.querySelector(sel);
const PAGE = 20; // turns per transcript page
const CLIENT_ID = "page:browser:" + Math.random().toString(36).slice(2, 10);

const app = {
  me: null, // the principal: {kind, name, session_id, turns_left, expires_at}
  stopped: false, // signed out, or the share revoked: nothing more is asked
  secret: "", // the page secret of this tab's sign-in (also in sessionStorage)
  view: null,
};

// --- small helpers ----------------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return node;
}

function shortId(id) {
  return String(id || "").slice(0, 8);
}

function clientLabel(clientId) {
  if (!clientId || !clientId.includes(":")) return null;
  const surface = clientId.split(":", 1)[0];
  return { tui: "terminal", script: "script", page: "browser" }[surface] || "tui " + surface;
}

// Mirrors state.who: the owner's name, or a participant's, and what they used when not a terminal.
function who(by, clientId) {
  by = by || {};
  let name = by.kind === "participant" ? (by.name ? by.name + " (participant)" : "a participant") : by.name || "owner";
  const label = clientLabel(clientId);
  return label === null || label === "terminal" ? name : name + " (" + label + ")";
}

function answeredLine(ev) {
  if (ev.how === "answered") {
    const parts = [...(ev.selected || []), ...(ev.freeform ? [ev.freeform] : [])];
    return "answered by " + who(ev.by) + ": " + parts.join(", ");
  }
  if (ev.how === "dismissed") return "question dismissed by " + who(ev.by);
  return "question cancelled";
}

function say(text, kind) {
  const banner = $("#banner");
  banner.textContent = text || "";
  banner.className = kind || "";
  banner.hidden = !text;
}

class Refusal extends Error {
  constructor(status, body) {
    super((body && body.detail) || "HTTP " + status);
    this.status = status;
    this.code = (body && body.error) || "";
  }
}

const SIGNED_OUT = new Set(["unauthorized", "token_revoked", "token_expired", "forbidden"]);

function signedOut(err) {
  app.stopped = true;
  keepSecret("");
  if (app.view && app.view.stop) app.view.stop();
  const why =
    err.code === "token_revoked"
      ? "This share was revoked: the page no longer follows the session. " + err.message
      : err.code === "token_expired"
        ? "This share expired. " + err.message
        : "Signed out. Open a new sign-in link (`tui web --link` on the machine, or `tui share`).";
  say(why, "error");
  $("#signout").hidden = true;
  document.body.classList.add("signed-out");
  for (const b of document.querySelectorAll("#composer, #question .choices, #newsession")) b.remove();
}

// --- the page's sign-in: its secret, sent as X-Tui-Page on every request --------------------------
const SECRET = "tui-page-secret";

function pageSecret() {
  try {
    return sessionStorage.getItem(SECRET) || "";
  } catch (e) {
    return "";
  }
}

function keepSecret(secret) {
  try {
    if (secret) sessionStorage.setItem(SECRET, secret);
    else sessionStorage.removeItem(SECRET);
  } catch (e) {
    /* storage refused (a private window's limits): this page load still works, a reload does not */
  }
  app.secret = secret || "";
}

function pageHeaders(extra) {
  return { "X-Tui-Page": app.secret || pageSecret() || "1", ...(extra || {}) };
}

async function api(method, path, body, extra) {
  const headers = pageHeaders(extra);
  const init = { method, headers, credentials: "same-origin", cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const reply = await fetch(path, init);
  let data = null;
  const text = await reply.text();
  try {
    data = text ? JSON.parse(text) : null;
  } catch (e) {
    data = { detail: text };
  }
  if (!reply.ok) {
    const err = new Refusal(reply.status, data);
    if (SIGNED_OUT.has(err.code) && path !== "/api/signin") signedOut(err);
    throw err;
  }
  return data;
}

function notify(title, body) {
  if (!document.hidden || !("Notification" in window) || Notification.permission !== "granted") return;
  try {
    new Notification(title, { body: String(body || "").slice(0, 200), tag: "tui" });
  } catch (e) {
    /* some browsers only notify from a service worker */
  }
}

// --- signing in -------------------------------------------------------------------------------
async function signIn() {
  const hash = new URLSearchParams(location.hash.slice(1));
  const code = hash.get("code");
  if (!code) return;
  // The code is used once: out of the address bar (and the history) before anything else.
  history.replaceState(null, "", location.pathname + location.search);
  try {
    const answer = await api("POST", "/api/signin", { code }, { "X-Tui-Page": "1" });
    keepSecret(answer.secret);
  } catch (err) {
    say("Could not sign in: " + err.message, "error");
  }
}

// --- the sessions -----------------------------------------------------------------------------
function showList() {
  const main = $("#main");
  main.replaceChildren();
  $("#title").textContent = "sessions";
  $("#status").replaceChildren();
  const list = el("ul", { id: "sessions", class: "sessions" });
  main.appendChild(list);
  if (app.me.kind === "owner") main.appendChild(newSessionForm());
  const view = { stop() {}, timer: null };
  app.view = view;
  const load = async () => {
    let rows;
    try {
      rows = await api("GET", "/api/sessions");
    } catch (err) {
      if (!app.stopped) say(err.message, "error");
      return;
    }
    const attached = await Promise.all(
      rows.map((r) =>
        r.live
          ? api("GET", "/api/sessions/" + r.id + "/transcript?limit=1").then(
              (t) => t.attached || [],
              () => [],
            )
          : Promise.resolve([]),
      ),
    );
    list.replaceChildren(
      ...rows.map((r, i) =>
        el(
          "li",
          { class: "row state-" + r.state },
          el(
            "a",
            { href: "#s=" + r.id, class: "open" },
            el("span", { class: "sid", text: shortId(r.id) }),
            el("span", { class: "badge", text: r.state === "asking" ? "question waiting" : r.state }),
            el("span", { class: "agent", text: r.agent + (r.model ? " · " + r.model : "") }),
          ),
          el("div", { class: "folder", text: r.folder }),
          el("div", { class: "here", text: attached[i].length ? "here: " + attached[i].map((p) => p.name).join(", ") : "" }),
        ),
      ),
    );
    if (!rows.length) list.appendChild(el("li", { class: "empty", text: "no sessions yet" }));
  };
  load();
  view.timer = setInterval(() => !document.hidden && !app.stopped && load(), 5000);
  view.stop = () => clearInterval(view.timer);
}

function newSessionForm() {
  const folder = el("input", { name: "folder", placeholder: "folder (where tui web started)", autocomplete: "off" });
  const agent = el("input", { name: "agent", placeholder: "agent (python, model, …)", autocomplete: "off" });
  const model = el("input", { name: "model", placeholder: "model (optional)", autocomplete: "off" });
  const form = el(
    "form",
    { id: "newsession", class: "newsession" },
    el("h2", { text: "New session" }),
    folder,
    agent,
    model,
    el("button", { type: "submit", text: "Start" }),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { wait: 20 };
    if (folder.value.trim()) body.working_directory = folder.value.trim();
    if (agent.value.trim()) body.agent = agent.value.trim();
    if (model.value.trim()) body.model = model.value.trim();
    try {
      const made = await api("POST", "/api/sessions", body);
      location.hash = "s=" + made.id;
    } catch (err) {
      say(err.message, "error");
    }
  });
  return form;
}

// --- search across sessions (GET /api/search: a participant finds in its session only) -------
function showSearch(q) {
  const main = $("#main");
  main.replaceChildren();
  $("#title").textContent = "search";
  $("#status").replaceChildren();
  $("#q").value = q;
  const said = el("p", { class: "hint", text: "searching…" });
  const list = el("ul", { id: "hits", class: "hits" });
  main.append(said, list);
  app.view = { stop() {} };
  api("GET", "/api/search?limit=50&q=" + encodeURIComponent(q)).then(
    (found) => {
      said.textContent = found.hits.length ? found.hits.length + (found.next !== null ? "+" : "") + " hits, newest first" : "nothing holds " + JSON.stringify(q);
      list.replaceChildren(
        ...found.hits.map((h) => {
          const where = h.name && (h.where === "tool" || h.where === "error") ? h.where + " " + h.name : h.where;
          const [a, b] = h.match;
          return el(
            "li",
            { class: "hit" },
            el(
              "a",
              { href: "#s=" + h.session_id + "&turn=" + h.turn, class: "open" },
              el("span", { class: "sid", text: shortId(h.session_id) }),
              el("span", { class: "num", text: "#" + h.turn }),
              el("span", { class: "where", text: where }),
              el("span", { class: "title", text: h.title + (h.archived ? " (archived)" : "") }),
            ),
            el("div", { class: "snippet" }, h.snippet.slice(0, a), el("mark", { text: h.snippet.slice(a, b) }), h.snippet.slice(b)),
          );
        }),
      );
    },
    (err) => {
      said.textContent = "";
      if (!app.stopped) say(err.message, "error");
    },
  );
}

// --- one session ------------------------------------------------------------------------------
class SessionView {
  constructor(id) {
    this.id = id;
    this.base = "/api/sessions/" + encodeURIComponent(id);
    this.turns = new Map(); // turn_id -> record (ended), in order
    this.current = null; // the running turn's record
    this.question = null;
    this.queue = [];
    this.queueHeld = false;
    this.notes = [];
    this.status = { state: "idle", model: null, tokens_in: 0, tokens_out: 0, attached: [] };
    this.agent = "";
    this.replyFormat = "verbatim";
    this.lastSeq = 0;
    this.hasMore = false;
    this.turnsStarted = 0;
    this.stopped = false;
    this.abort = null;
    this.nodes = new Map(); // turn_id -> article
    this.dirty = new Set();
    this.frame = 0;
    this.loadingOlder = false;
  }

  get canWrite() {
    return app.me.kind !== "viewer";
  }

  stop() {
    this.stopped = true;
    if (this.abort) this.abort.abort();
  }

  async open() {
    const main = $("#main");
    main.replaceChildren();
    this.log = el("div", { id: "transcript", class: "transcript", "aria-live": "polite" });
    this.notesBox = el("div", { class: "notes" });
    this.questionBox = el("section", { id: "question", class: "question", hidden: true });
    this.queueBox = el("div", { id: "queue", class: "queue", hidden: true });
    main.append(this.log, this.questionBox, this.queueBox);
    if (this.canWrite) main.appendChild(this.composer());
    $("#title").textContent = "session " + shortId(this.id);
    this.log.addEventListener("scroll", () => {
      if (this.log.scrollTop < 200) this.older();
    });
    try {
      const worker = await api("GET", this.base + "/worker");
      if (!worker.live) await api("POST", this.base + "/wake", { wait: 20 });
      const info = await api("GET", this.base + "/info");
      this.agent = info.agent;
      this.replyFormat = info.reply_format;
      this.status.model = info.model;
      const t = await api("GET", this.base + "/transcript?limit=" + PAGE);
      this.fromTranscript(t);
    } catch (err) {
      if (!app.stopped) say(err.message, "error");
      if (app.stopped) return;
    }
    this.renderAll();
    this.log.scrollTop = this.log.scrollHeight;
    if (this.wantTurn) this.showTurn(this.wantTurn);
    this.follow();
  }

  // A search's hit: its turn marked and brought into view (when the page loaded it).
  showTurn(number) {
    const node = this.log.querySelector('article[data-number="' + Number(number) + '"]');
    if (!node) {
      say("turn #" + number + " is older than the turns shown: scroll up to load it", "info");
      return;
    }
    node.classList.add("found");
    node.scrollIntoView({ block: "center" });
  }

  fromTranscript(t) {
    this.lastSeq = t.cursor;
    this.hasMore = t.has_more;
    this.turnsStarted = t.turns_started || 0;
    for (const r of t.turns) this.turns.set(r.turn_id, r);
    this.current = t.current && !t.current.outcome ? t.current : null;
    if (t.current && t.current.outcome) this.turns.set(t.current.turn_id, t.current);
    this.question = t.question && this.current && t.question.turn_id === this.current.turn_id ? t.question : null;
    this.queue = t.queue || [];
    this.queueHeld = t.queue_held;
    this.notes = t.notes || [];
    this.status.state = t.state;
    if (t.model) this.status.model = t.model;
    this.status.attached = t.attached || [];
  }

  // Older turns, when the view nears its top.
  async older() {
    if (!this.hasMore || this.loadingOlder || this.stopped) return;
    const first = this.turns.keys().next().value;
    if (!first) return;
    this.loadingOlder = true;
    try {
      const t = await api("GET", this.base + "/transcript?limit=" + PAGE + "&before=" + encodeURIComponent(first));
      const height = this.log.scrollHeight;
      const merged = new Map();
      for (const r of t.turns) if (!this.turns.has(r.turn_id)) merged.set(r.turn_id, r);
      for (const [k, v] of this.turns) merged.set(k, v);
      this.turns = merged;
      this.hasMore = t.has_more;
      const anchor = this.log.firstChild;
      for (const r of t.turns) {
        if (this.nodes.has(r.turn_id)) continue;
        this.log.insertBefore(this.turnNode(r), anchor);
      }
      this.log.scrollTop += this.log.scrollHeight - height;
    } catch (err) {
      if (!app.stopped) say(err.message, "error");
    } finally {
      this.loadingOlder = false;
    }
  }

  // --- following ------------------------------------------------------------------------------
  async follow() {
    let delay = 250;
    while (!this.stopped && !app.stopped) {
      this.abort = new AbortController();
      let reply;
      try {
        reply = await fetch(this.base + "/events?client_id=" + encodeURIComponent(CLIENT_ID), {
          headers: pageHeaders({ "Last-Event-ID": String(this.lastSeq), Accept: "text/event-stream" }),
          credentials: "same-origin",
          cache: "no-store",
          signal: this.abort.signal,
        });
      } catch (err) {
        reply = null;
      }
      if (reply && !reply.ok) {
        let body = null;
        try {
          body = await reply.json();
        } catch (e) {
          body = null;
        }
        const err = new Refusal(reply.status, body);
        if (SIGNED_OUT.has(err.code)) {
          signedOut(err);
          return;
        }
        if (err.code === "no_worker") {
          this.setConnection("the session's worker is gone; starting it again…");
          try {
            await api("POST", this.base + "/wake", { wait: 20 });
            continue;
          } catch (e) {
            if (app.stopped) return;
          }
        } else {
          this.setConnection("cannot follow: " + err.message);
        }
      } else if (reply) {
        this.setConnection("");
        delay = 250;
        try {
          await this.read(reply.body);
        } catch (err) {
          /* dropped: resume below */
        }
        if (this.stopped || app.stopped) return;
        this.setConnection("reconnecting…");
        // The stream ended: ask once whether the principal still may follow (a revoke ends it).
        try {
          await api("GET", "/api/info");
        } catch (err) {
          if (app.stopped) return;
        }
      } else {
        this.setConnection("reconnecting…");
      }
      await new Promise((r) => setTimeout(r, delay + Math.random() * delay));
      delay = Math.min(delay * 2, 5000);
    }
  }

  setConnection(text) {
    const node = $("#connection");
    node.textContent = text;
    node.hidden = !text;
  }

  async read(stream) {
    const reader = stream.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const message = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        this.message(message);
      }
    }
  }

  message(text) {
    let id = null;
    let type = "message";
    const data = [];
    for (const line of text.split("\n")) {
      if (!line || line.startsWith(":")) continue;
      const at = line.indexOf(":");
      const field = at < 0 ? line : line.slice(0, at);
      const value = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
      if (field === "id") id = value;
      else if (field === "event") type = value;
      else if (field === "data") data.push(value);
    }
    if (!data.length) return;
    let ev;
    try {
      ev = JSON.parse(data.join("\n"));
    } catch (e) {
      return;
    }
    if (!ev.type) ev.type = type;
    const seq = id !== null && /^\d+$/.test(id) ? Number(id) : ev.seq || 0;
    if (seq) {
      if (seq <= this.lastSeq) return; // applied already: never twice
      this.lastSeq = seq;
    }
    this.apply(ev);
  }

  // --- the reducer (mirrors tui/protocol/state.py for what is shown) --------------------------
  apply(ev) {
    const cur = this.current;
    const mine = cur && cur.turn_id === ev.turn_id;
    switch (ev.type) {
      case "text":
        if (mine) {
          cur.reply += ev.text;
          this.touch(cur);
        }
        break;
      case "thinking":
        if (mine) {
          cur.thinking = (cur.thinking || "") + ev.text;
          this.touch(cur);
        }
        break;
      case "plan":
        if (mine) {
          cur.plan = ev.entries || [];
          this.touch(cur);
        }
        break;
      case "tool_started":
        if (mine) {
          cur.tools.push({
            call_id: ev.call_id,
            name: ev.name,
            args: ev.args || {},
            title: ev.title,
            kind: ev.kind,
            output: "",
            status: "running",
            diffs: [],
            at_reply: cur.reply.length,
          });
          this.touch(cur);
        }
        break;
      case "tool_output":
        if (mine) {
          const tool = cur.tools.find((t) => t.call_id === ev.call_id);
          if (tool) {
            if (ev.text) tool.output += ev.text;
            if (ev.diff) tool.diffs.push(ev.diff);
            this.touch(cur);
          }
        }
        break;
      case "tool_updated":
        if (mine) {
          const tool = cur.tools.find((t) => t.call_id === ev.call_id);
          if (tool) {
            for (const k of ["title", "kind", "args", "locations"]) if (ev[k] !== null && ev[k] !== undefined) tool[k] = ev[k];
            if (ev.diffs) tool.diffs = ev.diffs;
            if (ev.output !== null && ev.output !== undefined) tool.output = ev.output;
            this.touch(cur);
          }
        }
        break;
      case "tool_ended":
        if (mine) {
          const tool = cur.tools.find((t) => t.call_id === ev.call_id);
          if (tool) {
            tool.status = ev.status;
            tool.value = ev.value;
            tool.error = ev.error;
            this.touch(cur);
          }
        }
        break;
      case "turn_started": {
        if (cur && cur.turn_id !== ev.turn_id) this.endHere("superseded by a new turn");
        let before = [];
        if (!this.current || this.current.turn_id !== ev.turn_id) {
          this.turnsStarted += 1;
          before = this.notes;
          this.notes = [];
        }
        this.current = {
          turn_id: ev.turn_id,
          prompt: ev.prompt,
          number: this.turnsStarted,
          by: ev.by,
          client_id: ev.client_id,
          origin: ev.origin,
          reply: "",
          tools: [],
          lines: before.map((text) => ({ kind: "before", text, tools: 0, at_reply: 0 })),
          answered: [],
          plan: [],
          thinking: "",
          outcome: null,
        };
        this.question = null;
        this.touch(this.current);
        this.renderNotes();
        this.renderQuestion();
        break;
      }
      case "question_asked":
        if (mine) {
          this.question = ev;
          this.renderQuestion();
          notify("A question waits in session " + shortId(this.id), ev.text);
        }
        break;
      case "question_resolved":
        if (this.question && this.question.question_id === ev.question_id) {
          if (cur) {
            const line = answeredLine(ev);
            cur.answered.push(line);
            cur.lines.push({ kind: "answered", text: line, tools: cur.tools.length, at_reply: cur.reply.length });
            this.touch(cur);
          }
          this.question = null;
          this.renderQuestion();
        }
        break;
      case "turn_ended":
        this.status.tokens_in += (ev.usage || {}).input || 0;
        this.status.tokens_out += (ev.usage || {}).output || 0;
        if (mine) {
          cur.outcome = ev.outcome;
          cur.error = ev.error;
          if (ev.reply) cur.reply = ev.reply;
          for (const t of cur.tools) if (t.status === "running") t.status = ev.outcome === "completed" ? "ended" : "interrupted";
          this.turns.delete(cur.turn_id);
          this.turns.set(cur.turn_id, cur);
          this.touch(cur);
          this.current = null;
          this.question = null;
          this.renderQuestion();
          notify("Turn #" + cur.number + " " + ev.outcome + " in session " + shortId(this.id), cur.reply.slice(-200));
        } else if (this.turns.has(ev.turn_id)) {
          const ended = this.turns.get(ev.turn_id);
          ended.outcome = ev.outcome;
          ended.error = ev.error;
          if (ev.reply) ended.reply = ev.reply;
          this.touch(ended);
        }
        break;
      case "queue_changed":
        this.queue = ev.items || [];
        this.queueHeld = ev.held;
        this.renderQueue();
        break;
      case "status":
        if (ev.model) this.status.model = ev.model;
        this.status.attached = ev.attached || [];
        if (ev.tokens_in || ev.tokens_out) {
          this.status.tokens_in = ev.tokens_in;
          this.status.tokens_out = ev.tokens_out;
        }
        this.status.activity = ev.activity;
        break;
      case "worker_started":
        if (cur) this.endHere("its worker stopped; a new one started");
        this.question = null;
        this.renderQuestion();
        this.agent = ev.agent;
        this.replyFormat = ev.reply_format || this.replyFormat;
        if (ev.model) this.status.model = ev.model;
        break;
      case "model_changed":
        this.status.model = ev.model;
        break;
      case "note": {
        const line = "note" + (ev.source ? " from " + ev.source : "") + ": " + ev.text;
        if (cur) {
          cur.lines.push({ kind: "note", text: line, tools: cur.tools.length, at_reply: cur.reply.length });
          this.touch(cur);
        } else if (!this.notes.includes(line)) {
          this.notes = [...this.notes, line].slice(-20);
          this.renderNotes();
        }
        break;
      }
      default:
        break;
    }
    this.status.state = this.question ? "asking" : this.current ? "working" : "idle";
    this.renderStatus();
  }

  endHere(why) {
    const cur = this.current;
    cur.outcome = "failed";
    cur.error = why;
    for (const t of cur.tools) if (t.status === "running") t.status = "interrupted";
    this.turns.set(cur.turn_id, cur);
    this.touch(cur);
    this.current = null;
    this.question = null;
  }

  // --- drawing --------------------------------------------------------------------------------
  touch(record) {
    this.dirty.add(record);
    if (!this.frame) this.frame = requestAnimationFrame(() => this.flush());
  }

  flush() {
    this.frame = 0;
    const stick = this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight < 80;
    for (const record of this.dirty) {
      const old = this.nodes.get(record.turn_id);
      const node = this.turnNode(record);
      if (old) old.replaceWith(node);
      else this.log.appendChild(node);
    }
    this.dirty.clear();
    if (stick) this.log.scrollTop = this.log.scrollHeight;
  }

  renderAll() {
    this.log.replaceChildren();
    this.nodes.clear();
    for (const r of this.turns.values()) this.log.appendChild(this.turnNode(r));
    if (this.current) this.log.appendChild(this.turnNode(this.current));
    this.log.appendChild(this.notesBox);
    this.renderNotes();
    this.renderQuestion();
    this.renderQueue();
    this.renderStatus();
  }

  renderNotes() {
    this.notesBox.replaceChildren(...this.notes.map((n) => el("div", { class: "line note", text: n })));
    if (this.notesBox.parentNode === this.log) this.log.appendChild(this.notesBox);
  }

  turnNode(r) {
    const head = el(
      "div",
      { class: "head" },
      el("span", { class: "num", text: "#" + (r.number || "?") }),
      el("span", { class: "by", text: r.origin === "note" ? "note" : who(r.by, r.client_id) }),
      r.outcome ? el("span", { class: "outcome " + r.outcome, text: r.outcome }) : el("span", { class: "outcome running", text: "running" }),
    );
    const article = el("article", { class: "turn", "data-turn": r.turn_id, "data-number": String(r.number || 0) }, head);
    for (const line of r.lines || []) if (line.kind === "before") article.appendChild(el("div", { class: "line note", text: line.text }));
    article.appendChild(el("pre", { class: "prompt", text: r.prompt }));
    if (r.thinking) {
      const d = el("details", { class: "thinking" }, el("summary", { text: "thinking" }), el("pre", { text: r.thinking }));
      article.appendChild(d);
    }
    if (r.plan && r.plan.length) {
      article.appendChild(
        el(
          "ol",
          { class: "plan" },
          ...r.plan.map((p) => el("li", { class: "plan-" + p.status, text: (p.status === "completed" ? "✓ " : p.status === "in_progress" ? "▸ " : "○ ") + p.content })),
        ),
      );
    }
    const body = el("div", { class: "steps" });
    for (const step of steps(r)) {
      if (step[0] === "text") body.appendChild(this.replyNode(step[1]));
      else if (step[0] === "tool") body.appendChild(toolNode(step[1]));
      else body.appendChild(el("div", { class: "line" + (step[1].startsWith("answered by") ? " answered" : " note"), text: step[1] }));
    }
    article.appendChild(body);
    if (r.error) article.appendChild(el("div", { class: "error", text: r.error }));
    this.nodes.set(r.turn_id, article);
    return article;
  }

  replyNode(text) {
    if (this.replyFormat === "markdown") {
      const node = renderMarkdown(text);
      node.classList.add("reply");
      return node;
    }
    return el("pre", { class: "reply output", text });
  }

  renderQuestion() {
    const q = this.question;
    const box = this.questionBox;
    box.replaceChildren();
    box.hidden = !q;
    if (!q) return;
    box.appendChild(el("div", { class: "qtext", text: q.text }));
    if (!this.canWrite || app.stopped) {
      box.appendChild(el("div", { class: "hint", text: "waiting for an answer (a viewer cannot answer)" }));
      if (q.options && q.options.length) box.appendChild(el("ul", { class: "optlist" }, ...q.options.map((o) => el("li", { text: o.label }))));
      return;
    }
    const choices = el("div", { class: "choices" });
    const send = async (selected, freeform) => {
      for (const b of box.querySelectorAll("button, input")) b.disabled = true;
      try {
        const body = { question_id: q.question_id, selected, client_id: CLIENT_ID };
        if (freeform) body.freeform = freeform;
        await api("POST", this.base + "/answer", body);
      } catch (err) {
        // first answer wins: someone else's came first, or the question is gone
        say(err.code === "question_not_pending" ? "Someone answered first: " + err.message : err.message, "error");
        for (const b of box.querySelectorAll("button, input")) b.disabled = false;
      }
    };
    if (q.multiple) {
      const boxes = (q.options || []).map((o) =>
        el("label", { class: "opt" }, el("input", { type: "checkbox", value: o.label }), " " + o.label, o.description ? el("small", { text: " " + o.description }) : null),
      );
      choices.append(...boxes);
      choices.appendChild(
        el("button", {
          class: "primary",
          text: "Answer",
          onclick: () => send(boxes.map((b) => b.querySelector("input")).filter((i) => i.checked).map((i) => i.value)),
        }),
      );
    } else {
      for (const o of q.options || []) {
        choices.appendChild(el("button", { class: "option", title: o.description || null, onclick: () => send([o.label]) }, o.label));
      }
    }
    if (q.freeform || !(q.options || []).length) {
      const input = el("input", { class: "freeform", placeholder: "your answer", autocomplete: "off" });
      const form = el("form", { class: "free" }, input, el("button", { type: "submit", text: "Send" }));
      form.addEventListener("submit", (e) => {
        e.preventDefault();
        if (input.value.trim()) send([], input.value.trim());
      });
      choices.appendChild(form);
    }
    box.appendChild(choices);
  }

  renderQueue() {
    const box = this.queueBox;
    box.hidden = !this.queue.length;
    box.replaceChildren(
      el("div", { class: "qhead", text: "queued" + (this.queueHeld ? " (held: /resume runs it)" : "") }),
      ...this.queue.map((item) => el("div", { class: "queued", text: item.prompt })),
    );
  }

  renderStatus() {
    const s = this.status;
    const here = (s.attached || []).map((p) => p.name + (p.kind !== "owner" ? " (" + p.kind + ")" : ""));
    $("#status").replaceChildren(
      el("span", { class: "state state-" + s.state, text: s.state }),
      el("span", { text: this.agent + (s.model ? " · " + s.model : "") }),
      el("span", { text: "tokens " + s.tokens_in + "↑ " + s.tokens_out + "↓" }),
      el("span", { class: "here", text: here.length ? "here: " + here.join(", ") : "" }),
    );
    const stop = $("#interrupt");
    if (stop) stop.disabled = !this.current;
  }

  composer() {
    const text = el("textarea", { id: "prompt", rows: 2, placeholder: "prompt: Enter sends, Shift+Enter a new line", autocomplete: "off" });
    const submit = async (delivery) => {
      const prompt = text.value;
      if (!prompt.trim()) return;
      try {
        if (prompt.trim() === "/resume") await api("POST", this.base + "/queue/resume");
        else
          await api("POST", this.base + "/turn", {
            prompt,
            client_id: CLIENT_ID,
            request_id: CLIENT_ID + ":" + Date.now() + ":" + Math.random().toString(36).slice(2, 6),
            delivery: delivery || (this.current ? "queue" : "now"),
          });
        text.value = "";
        say("");
      } catch (err) {
        say(err.message, "error");
      }
    };
    text.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        submit();
      }
    });
    const interrupt = async () => {
      try {
        await api("POST", this.base + "/interrupt", { client_id: CLIENT_ID });
      } catch (err) {
        say(err.message, "error");
      }
    };
    return el(
      "form",
      { id: "composer", class: "composer", onsubmit: (e) => (e.preventDefault(), submit()) },
      text,
      el(
        "div",
        { class: "buttons" },
        el("button", { type: "submit", id: "send", class: "primary", text: "Send" }),
        el("button", { type: "button", id: "queue-btn", text: "Queue", onclick: () => submit("queue") }),
        el("button", { type: "button", id: "interrupt", text: "Interrupt", onclick: interrupt }),
      ),
    );
  }
}

// Mirrors state.steps: a turn's reply, tool calls and lines in the order they came.
function steps(r) {
  const out = [];
  const reply = r.reply || "";
  const tools = r.tools || [];
  let done = 0;
  let used = 0;
  const textTo = (at) => {
    at = Math.max(done, Math.min(at, reply.length));
    if (at > done) {
      out.push(["text", reply.slice(done, at)]);
      done = at;
    }
  };
  const toolsTo = (count) => {
    while (used < Math.min(count, tools.length)) {
      textTo(tools[used].at_reply || 0);
      out.push(["tool", tools[used]]);
      used += 1;
    }
  };
  const lines = (r.lines || []).filter((l) => l.kind !== "before");
  for (const line of lines) {
    toolsTo(line.tools || 0);
    textTo(line.at_reply || 0);
    out.push(["line", line.text]);
  }
  toolsTo(tools.length);
  if (!lines.some((l) => l.kind === "answered")) for (const a of r.answered || []) out.push(["line", a]);
  textTo(reply.length);
  return out;
}

const ASKS = new Set(["ask", "ask_user"]); // a question's call: its box and its answered line say it

function toolNode(t) {
  const title = t.title || t.name;
  const args = t.args || {};
  const output = t.output || "";
  const short = output.split("\n").length <= 12 && (args.code || "").split("\n").length <= 12;
  const node = el(
    "details",
    { class: "tool status-" + t.status, open: t.status === "running" || t.status === "error" || short ? true : null },
    el("summary", {}, el("span", { class: "tname", text: title }), el("span", { class: "tstatus", text: t.status })),
  );
  // A program's code as code; other arguments one a line; a question's are shown by its box.
  if (typeof args.code === "string") node.appendChild(el("pre", { class: "code", text: args.code }));
  else if (!ASKS.has(t.name) && title === t.name && Object.keys(args).length) {
    const lines = Object.entries(args).map(([k, v]) => k + ": " + (typeof v === "string" ? v : JSON.stringify(v)));
    node.appendChild(el("pre", { class: "args", text: lines.join("\n") }));
  }
  if (output) node.appendChild(el("pre", { class: "output", text: output }));
  for (const d of t.diffs || []) node.appendChild(diffNode(d));
  if (t.error) node.appendChild(el("pre", { class: "error", text: t.error }));
  else if (t.value !== null && t.value !== undefined && !ASKS.has(t.name))
    node.appendChild(el("pre", { class: "value", text: typeof t.value === "string" ? t.value : JSON.stringify(t.value) }));
  return node;
}

function diffNode(d) {
  const pre = el("pre", { class: "diff" });
  pre.appendChild(el("div", { class: "dpath", text: d.path }));
  const old = d.old === null || d.old === undefined ? [] : d.old.split("\n");
  const neu = (d.new || "").split("\n");
  let a = 0;
  while (a < old.length && a < neu.length && old[a] === neu[a]) a += 1;
  let b = 0;
  while (b < old.length - a && b < neu.length - a && old[old.length - 1 - b] === neu[neu.length - 1 - b]) b += 1;
  for (const l of old.slice(a, old.length - b)) pre.appendChild(el("div", { class: "del", text: "-" + l }));
  for (const l of neu.slice(a, neu.length - b)) pre.appendChild(el("div", { class: "add", text: "+" + l }));
  return pre;
}

// --- the page ---------------------------------------------------------------------------------
function route() {
  if (app.stopped) return;
  if (app.view && app.view.stop) app.view.stop();
  say("");
  const hash = new URLSearchParams(location.hash.slice(1));
  const sid = hash.get("s") || (app.me.kind !== "owner" ? app.me.session_id : null);
  $("#home").hidden = app.me.kind !== "owner";
  if (hash.get("q")) {
    showSearch(hash.get("q"));
  } else if (sid) {
    const view = new SessionView(sid);
    view.wantTurn = hash.get("turn");
    app.view = view;
    view.open();
  } else {
    showList();
  }
}

async function main() {
  await signIn();
  try {
    const info = await api("GET", "/api/info");
    app.me = info.principal;
  } catch (err) {
    if (!app.stopped) signedOut(err);
    $("#main").replaceChildren(
      el("p", { class: "hint", text: "Open the sign-in link that `tui web` or `tui share` printed (`tui web --link` prints a fresh one)." }),
    );
    return;
  }
  $("#me").textContent = app.me.name + " · " + app.me.kind;
  $("#signout").hidden = false;
  $("#signout").addEventListener("click", async () => {
    try {
      await api("POST", "/api/signout");
    } finally {
      signedOut({ code: "unauthorized", message: "" });
    }
  });
  const alerts = $("#alerts");
  if ("Notification" in window && Notification.permission === "default") {
    alerts.hidden = false;
    alerts.addEventListener("click", async () => {
      await Notification.requestPermission();
      alerts.hidden = true;
    });
  }
  $("#search").hidden = false;
  $("#search").addEventListener("submit", (e) => {
    e.preventDefault();
    const q = $("#q").value.trim();
    if (q) location.hash = "q=" + encodeURIComponent(q);
  });
  window.addEventListener("hashchange", route);
  route();
}

main();
