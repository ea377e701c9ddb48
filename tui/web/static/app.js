// The page of `tui web`: the sessions, and one session followed live.
//
// Everything a program or an agent says reaches the page as text nodes (textContent), or through
// renderMarkdown (md.js), which makes only allow-listed elements; nothing here uses innerHTML.
// Every request carries the cookie and, as its X-Tui-Page header, the page secret sign-in gave
// (pageHeaders): the bridge honours the cookie only with it. The secret is kept in sessionStorage,
// which belongs to this origin (port included) and this tab: another local server the browser
// opens gets the cookie (cookies ignore the port) but never the secret. A reload keeps it; a new
// tab signs in again.
// A session is followed through `tui web`'s attachment (GET …/changes): fetch() reads its SSE
// stream (EventSource cannot send that header), each change already in words, saying in its
// fields what to draw; the stream resumes with Last-Event-ID from the last change drawn, so
// nothing is missed or drawn twice, and a page too far behind (or new) is sent a snapshot.
// No event is applied and nothing is worded here: the page draws, takes input and signs in.
"use strict";

const $ = (sel) => document.querySelector(sel);
const PAGE = 20; // older turns asked at once
const RENDER_EVERY = 250; // ms between two draws of what streams into a turn
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
            r.title ? el("span", { class: "stitle", text: r.title }) : null,
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
// The session as `tui web`'s attachment words it: each change names what to draw in its fields
// (docs/remote.md, "The page"); a field that is not there changes nothing. The page keeps the
// views it was sent, to draw them again, and decides nothing about the session itself.
class SessionView {
  constructor(id) {
    this.id = id;
    this.base = "/api/sessions/" + encodeURIComponent(id);
    this.cursor = ""; // the id of the last change drawn: the stream resumes after it
    this.turns = new Map(); // turn_id -> {view, node}, in the order drawn
    this.hasMore = false;
    this.replyFormat = "verbatim";
    this.stopped = false;
    this.abort = null;
    this.dirty = new Map(); // turn_id -> Set of step indexes to draw again ("all": the whole turn)
    this.timer = 0;
    this.drawnAt = 0;
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
    this.linesBox = el("div", { class: "lines" });
    this.log.appendChild(this.linesBox);
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
    } catch (err) {
      if (!app.stopped) say(err.message, "error");
      if (app.stopped) return;
    }
    this.follow();
  }

  // A search's hit: its turn marked and brought into view (when the page drew it).
  showTurn(number) {
    const node = this.log.querySelector('article[data-number="' + Number(number) + '"]');
    if (!node) {
      say("turn #" + number + " is older than the turns shown: scroll up to load it", "info");
      return;
    }
    node.classList.add("found");
    node.scrollIntoView({ block: "center" });
  }

  // Older turns, when the view nears its top.
  async older() {
    if (!this.hasMore || this.loadingOlder || this.stopped) return;
    const first = this.turns.keys().next().value;
    if (!first) return;
    this.loadingOlder = true;
    try {
      const page = await api("GET", this.base + "/turns?limit=" + PAGE + "&before=" + encodeURIComponent(first));
      const height = this.log.scrollHeight;
      const anchor = this.log.firstChild;
      const merged = new Map();
      for (const view of page.turns) {
        if (this.turns.has(view.turn_id)) continue;
        const node = turnNode(view, this.replyFormat);
        merged.set(view.turn_id, { view, node });
        this.log.insertBefore(node, anchor);
      }
      for (const [k, v] of this.turns) merged.set(k, v);
      this.turns = merged;
      this.hasMore = page.has_more;
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
        reply = await fetch(this.base + "/changes?client_id=" + encodeURIComponent(CLIENT_ID), {
          headers: pageHeaders({ "Last-Event-ID": this.cursor, Accept: "text/event-stream" }),
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
    const data = [];
    for (const line of text.split("\n")) {
      if (!line || line.startsWith(":")) continue;
      const at = line.indexOf(":");
      const field = at < 0 ? line : line.slice(0, at);
      const value = at < 0 ? "" : line.slice(at + 1).replace(/^ /, "");
      if (field === "id") id = value;
      else if (field === "data") data.push(value);
    }
    if (!data.length) return;
    let change;
    try {
      change = JSON.parse(data.join("\n"));
    } catch (e) {
      return;
    }
    if (id !== null) this.cursor = id;
    this.take(change);
  }

  // --- drawing what the change says -----------------------------------------------------------
  take(c) {
    if (c.snapshot) this.reset(c);
    else if (c.turns) for (const view of c.turns) this.putTurn(view);
    if (c.turn_id && c.step && c.at !== undefined && c.at !== null) this.putStep(c.turn_id, c.at, c.step, c.append);
    if (c.turn_id && (c.thinking !== undefined || c.plan !== undefined)) {
      const turn = this.turns.get(c.turn_id);
      if (turn) {
        if (c.thinking !== undefined) turn.view.thinking += c.thinking;
        if (c.plan !== undefined) turn.view.plan = c.plan;
        this.touch(c.turn_id, "all");
      }
    }
    if (c.lines) this.drawLines(c.lines);
    if ("question" in c) this.drawQuestion(c.question);
    if (c.queue) this.drawQueue(c.queue);
    if (c.status) this.drawStatus(c.status);
    if (c.connection !== undefined) this.setConnection(c.connection);
    if (c.notice) notify(c.notice.title, c.notice.body);
    if (c.rewound) this.markRewound(c.rewound[0], c.rewound[1]);
  }

  markRewound(first, last) {
    for (const [turnId, turn] of this.turns) {
      const number = parseInt(turn.view.number.slice(1), 10);
      if (number >= first && number <= last && !turn.view.rewound) {
        turn.view.rewound = true;
        this.touch(turnId, "all");
      }
    }
  }

  reset(c) {
    for (const { node } of this.turns.values()) node.remove();
    this.turns.clear();
    this.dirty.clear();
    this.hasMore = c.has_more;
    if (c.reply_format) this.replyFormat = c.reply_format;
    for (const view of c.turns || []) this.putTurn(view, true);
    this.log.scrollTop = this.log.scrollHeight;
    if (this.wantTurn) {
      const number = this.wantTurn;
      this.wantTurn = null; // once: the first state drawn
      this.showTurn(number);
    }
  }

  putTurn(view, now) {
    const turn = this.turns.get(view.turn_id);
    if (turn) {
      turn.view = view;
      this.touch(view.turn_id, "all");
      return;
    }
    const node = turnNode(view, this.replyFormat);
    this.turns.set(view.turn_id, { view, node });
    this.log.insertBefore(node, this.linesBox);
    if (!now) this.stick();
  }

  putStep(turnId, at, step, append) {
    const turn = this.turns.get(turnId);
    if (!turn) return;
    const steps = turn.view.steps;
    const old = steps[at];
    if (append && old && old.kind === step.kind) {
      if (step.kind === "tool") old.tool.output += step.tool.output;
      else old.text += step.text;
    } else {
      steps[at] = step;
    }
    this.touch(turnId, at);
  }

  // What streams is drawn at most every RENDER_EVERY ms: a long reply is not drawn each frame.
  touch(turnId, what) {
    const marks = this.dirty.get(turnId) || new Set();
    marks.add(what);
    this.dirty.set(turnId, marks);
    if (this.timer) return;
    const wait = Math.max(0, this.drawnAt + RENDER_EVERY - performance.now());
    this.timer = setTimeout(() => requestAnimationFrame(() => this.flush()), wait);
  }

  flush() {
    this.timer = 0;
    this.drawnAt = performance.now();
    const stick = this.atBottom();
    for (const [turnId, marks] of this.dirty) {
      const turn = this.turns.get(turnId);
      if (!turn) continue;
      if (marks.has("all") || !turn.node.isConnected) {
        const node = turnNode(turn.view, this.replyFormat);
        turn.node.replaceWith(node);
        turn.node = node;
        continue;
      }
      const body = turn.node.querySelector(".steps");
      for (const at of [...marks].sort((a, b) => a - b)) {
        const fresh = stepNode(turn.view.steps[at], this.replyFormat);
        const old = body.children[at];
        if (old) old.replaceWith(fresh);
        else body.appendChild(fresh);
      }
    }
    this.dirty.clear();
    if (stick) this.log.scrollTop = this.log.scrollHeight;
  }

  atBottom() {
    return this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight < 80;
  }

  stick() {
    if (this.atBottom()) requestAnimationFrame(() => (this.log.scrollTop = this.log.scrollHeight));
  }

  drawLines(lines) {
    this.linesBox.replaceChildren(...lines.map((l) => el("div", { class: "line " + l.style, text: l.text })));
    this.stick();
  }

  drawQuestion(q) {
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

  drawQueue(queue) {
    const box = this.queueBox;
    box.hidden = !queue.prompts.length;
    box.replaceChildren(el("div", { class: "qhead", text: queue.head }), ...queue.prompts.map((p) => el("div", { class: "queued", text: p })));
  }

  drawStatus(s) {
    $("#status").replaceChildren(
      el("span", { class: "state state-" + s.state, text: s.state }),
      ...s.parts.map((p) => el("span", { text: p })),
      el("span", { class: "here", text: s.here }),
    );
    const stop = $("#interrupt");
    if (stop) stop.disabled = !s.working;
  }

  composer() {
    const text = el("textarea", { id: "prompt", rows: 2, placeholder: "prompt: Enter sends, Shift+Enter a new line", autocomplete: "off" });
    // Send: the worker starts the prompt now or queues it behind the running turn ("auto"), in
    // one step, so the page never decides from what it shows; Queue: queued whatever runs.
    const submit = async (queue) => {
      const prompt = text.value;
      if (!prompt.trim()) return;
      try {
        if (prompt.trim() === "/resume") await api("POST", this.base + "/queue/resume");
        else
          await api("POST", this.base + "/turn", {
            prompt,
            client_id: CLIENT_ID,
            request_id: CLIENT_ID + ":" + Date.now() + ":" + Math.random().toString(36).slice(2, 6),
            delivery: queue ? "queue" : "auto",
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
        el("button", { type: "button", id: "queue-btn", text: "Queue", onclick: () => submit(true) }),
        el("button", { type: "button", id: "interrupt", text: "Interrupt", onclick: interrupt }),
      ),
    );
  }
}

// --- a turn as it was sent, in words ----------------------------------------------------------
function turnNode(t, replyFormat) {
  const head = el(
    "div",
    { class: "head" },
    el("span", { class: "num", text: t.number }),
    el("span", { class: "by", text: t.who }),
    el("span", { class: "outcome " + t.outcome, text: t.outcome }),
    t.rewound ? el("span", { class: "outcome rewound", text: "rewound" }) : null,
  );
  // The lines said before the turn (a rewind, a note) come above its header, where they were said.
  const before = t.before.map((line) => el("div", { class: "line " + line.style, text: line.text }));
  const article = el("article", { class: "turn", "data-turn": t.turn_id, "data-number": t.number.slice(1) }, ...before, head);
  article.appendChild(el("pre", { class: "prompt", text: t.prompt }));
  if (t.thinking) article.appendChild(el("details", { class: "thinking" }, el("summary", { text: "thinking" }), el("pre", { text: t.thinking })));
  if (t.plan.length) article.appendChild(el("ol", { class: "plan" }, ...t.plan.map((p) => el("li", { text: p }))));
  const body = el("div", { class: "steps" });
  for (const step of t.steps) body.appendChild(stepNode(step, replyFormat));
  article.appendChild(body);
  if (t.error) article.appendChild(el("div", { class: "error", text: t.error }));
  return article;
}

function stepNode(step, replyFormat) {
  if (!step) return el("div", {});
  if (step.kind === "tool") return toolNode(step.tool);
  if (step.kind === "line") return el("div", { class: "line " + step.style, text: step.text });
  if (replyFormat === "markdown") {
    const node = renderMarkdown(step.text);
    node.classList.add("reply");
    return node;
  }
  return el("pre", { class: "reply output", text: step.text });
}

function toolNode(t) {
  const node = el(
    "details",
    { class: "tool status-" + t.status, open: t.open || null },
    el("summary", {}, el("span", { class: "tname", text: t.title }), el("span", { class: "tstatus", text: t.status })),
  );
  if (t.code) node.appendChild(el("pre", { class: "code", text: t.code }));
  if (t.args) node.appendChild(el("pre", { class: "args", text: t.args }));
  if (t.output) node.appendChild(el("pre", { class: "output", text: t.output }));
  for (const d of t.diffs || []) {
    const pre = el("pre", { class: "diff" }, el("div", { class: "dpath", text: d.path }));
    for (const l of d.lines) pre.appendChild(el("div", { class: l.sign === "-" ? "del" : "add", text: l.sign + l.text }));
    node.appendChild(pre);
  }
  if (t.error) node.appendChild(el("pre", { class: "error", text: t.error }));
  else if (t.value) node.appendChild(el("pre", { class: "value", text: t.value }));
  return node;
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
