// Markdown to DOM nodes, safely: every piece of text becomes a text node, and only the elements
// of an allow-list are ever made (p, h1-h6, pre/code, ul/ol/li, blockquote, hr, strong, em, del,
// a, table). Raw HTML in the Markdown shows as text. A link keeps its address only when it is
// http(s) or mailto; anything else (javascript:, data:, …) is shown as text. No innerHTML here.
"use strict";

const SAFE_LINK = /^(https?:\/\/|mailto:)/i;

function el(tag, cls) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  return node;
}

// Every piece below takes time linear in its input, whatever the input (an unclosed `**`, a
// thousand `[`, a line of spaces): a closer is looked for by a scan shared by every opener of its
// kind (finder), never by a regular expression that scans to the end from each opener; nesting is
// bounded (MAX_INLINE_DEPTH, MAX_BLOCK_DEPTH), deeper text shows as it is. `work` counts the
// characters looked at, so a test can check the cost grows with the size and no faster.
const MAX_INLINE_DEPTH = 8;
const MAX_BLOCK_DEPTH = 8;
let work = 0;

const ESCAPABLE = /[\\`*_{}\[\]()#+\-.!~<>|]/;
const SPACE = /\s/;
const WORD = /\w/;
const TERMINATOR = /[\n\r\u2028\u2029]/;
const LINK_SCHEME = /(?:https?:\/\/|mailto:)/iy;

// Whether ch is whitespace as a regular expression's \s means it (undefined: no).
function isSpace(ch) {
  if (ch === undefined) return false;
  const code = ch.charCodeAt(0);
  if (code < 128) return code === 32 || (code >= 9 && code <= 13);
  return SPACE.test(ch);
}

// The first position at or after `from` where is(j) holds (text.length: none). Queries come with
// `from` never smaller than the last one, so one forward scan serves them all.
function finder(text, is) {
  let found = -1;
  return (from) => {
    if (found >= from) return found;
    let j = from;
    while (j < text.length && !is(j)) j += 1;
    work += Math.max(0, j - from);
    found = j;
    return j;
  };
}

// Runs of backticks: a code span opens with a run and closes with the next run of the same length.
function backtickRuns(text) {
  const byLength = new Map(); // length -> {starts: [...], next: index of the first not yet passed}
  let j = 0;
  while (j < text.length) {
    if (text[j] !== "`") {
      j += 1;
      continue;
    }
    const start = j;
    while (j < text.length && text[j] === "`") j += 1;
    const length = j - start;
    if (!byLength.has(length)) byLength.set(length, { starts: [], next: 0 });
    byLength.get(length).starts.push(start);
  }
  work += text.length;
  // The first run of `length` starting after `after` (queries never go back).
  return (length, after) => {
    const runs = byLength.get(length);
    if (!runs) return -1;
    while (runs.next < runs.starts.length && runs.starts[runs.next] <= after) {
      runs.next += 1;
      work += 1;
    }
    return runs.next < runs.starts.length ? runs.starts[runs.next] : -1;
  };
}

// After a link's label, "]" at b: "(" address [space "title"] ")". Its address and end, or null.
function linkTail(text, b) {
  const n = text.length;
  if (text[b + 1] !== "(") return null;
  const open = b + 2;
  let p = open;
  while (p < n && isSpace(text[p])) p += 1;
  const spaced = p;
  if (text[p] === "<") p += 1;
  const from = p;
  // the address: no space, no ( ) > outside one level of (parentheses)
  while (p < n) {
    const ch = text[p];
    if (ch === "(") {
      let q = p + 1;
      while (q < n && text[q] !== "(" && text[q] !== ")" && !isSpace(text[q])) q += 1;
      work += q - p;
      if (text[q] !== ")") break;
      p = q + 1;
    } else if (ch === ")" || ch === ">" || isSpace(ch)) break;
    else p += 1;
  }
  work += p - open;
  let end = closeLink(text, text[p] === ">" ? p + 1 : p);
  if (end >= 0) return { href: text.slice(from, p), end };
  // no address, only a title after a space: ( "title")
  if (spaced > open && text[spaced] === '"') {
    end = closeLink(text, open);
    if (end >= 0) return { href: "", end };
  }
  return null;
}

// From p: an optional title (spaces, then "…") and spaces, then ")". The end, or -1.
function closeLink(text, p) {
  const n = text.length;
  let q = p;
  while (q < n && isSpace(text[q])) q += 1;
  work += q - p;
  if (q > p && text[q] === '"') {
    let r = q + 1;
    while (r < n && text[r] !== '"') r += 1;
    work += r - q;
    if (r < n) {
      r += 1;
      while (r < n && isSpace(text[r])) r += 1;
      if (text[r] === ")") return r + 1;
    }
  }
  return text[q] === ")" ? q + 1 : -1;
}

// Where each kind's closer may be: its characters, after a character that is not a space.
const CLOSERS = {
  "**": (t, j) => t[j] === "*" && t[j + 1] === "*" && !isSpace(t[j - 1]),
  __: (t, j) => t[j] === "_" && t[j + 1] === "_" && !isSpace(t[j - 1]),
  "~~": (t, j) => t[j] === "~" && t[j + 1] === "~" && !isSpace(t[j - 1]),
  "*": (t, j) => t[j] === "*" && !isSpace(t[j - 1]) && t[j + 1] !== "*" && t[j + 1] !== "_",
  _: (t, j) => t[j] === "_" && !isSpace(t[j - 1]) && t[j + 1] !== "*" && t[j + 1] !== "_",
  "]": (t, j) => t[j] === "]",
};
const SPECIAL = /[\\`*_~\[<]/g; // where something other than plain text may start

// Inline: `code`, **strong**, *em* / _em_, ~~del~~, [text](url), <https://autolink>.
function inline(text, parent, depth) {
  depth = depth || 0;
  if (depth > MAX_INLINE_DEPTH) {
    parent.appendChild(document.createTextNode(text));
    work += text.length;
    return;
  }
  const n = text.length;
  let i = 0;
  let mark = 0; // text[mark, i) is plain text not yet added
  let pending = ""; // plain text before mark not yet added (escapes make it differ from text)
  const finders = {};
  const find = (kind, from) => {
    if (!finders[kind]) {
      const is = CLOSERS[kind];
      finders[kind] = finder(text, (j) => is(text, j));
    }
    return finders[kind](from);
  };
  const flush = () => {
    const plain = pending + text.slice(mark, i);
    if (plain) parent.appendChild(document.createTextNode(plain));
    pending = "";
  };
  const nest = (tag, from, to, next) => {
    flush();
    const node = el(tag);
    inline(text.slice(from, to), node, depth + 1);
    parent.appendChild(node);
    i = mark = next;
  };
  let runs = null;
  let tailAt = -1;
  let tail = null;
  while (i < n) {
    SPECIAL.lastIndex = i;
    const next = SPECIAL.exec(text);
    work += (next ? next.index : n) - i + 1;
    if (!next) {
      i = n;
      break;
    }
    i = next.index;
    const c = text[i];
    if (c === "\\") {
      if (i + 1 < n && ESCAPABLE.test(text[i + 1])) {
        pending += text.slice(mark, i) + text[i + 1];
        i = mark = i + 2;
      } else i += 1;
      continue;
    }
    if (c === "`") {
      let end = i;
      while (end < n && text[end] === "`") end += 1;
      work += end - i;
      runs = runs || backtickRuns(text);
      let length = end - i;
      let close = -1;
      for (; length > 0 && close < 0; length -= 1) close = runs(length, end);
      if (close < 0) {
        i = end; // no run of its length (or shorter) closes it: plain text
        continue;
      }
      length += 1;
      flush();
      const body = text.slice(i + length, close);
      const code = el("code");
      code.textContent = body.trim() ? body.replace(/^ (.*) $/, "$1") : body;
      parent.appendChild(code);
      i = mark = close + length;
      continue;
    }
    if (c === "*" || c === "_") {
      if (text[i + 1] === c && i + 2 < n && !isSpace(text[i + 2])) {
        const j = find(c + c, i + 3);
        if (j < n) {
          nest("strong", i + 2, j, j + 2);
          continue;
        }
      }
      if (i + 1 < n && !isSpace(text[i + 1])) {
        const j = find(c, i + 2);
        if (j < n && (c === "*" || !WORD.test(text[i - 1] || ""))) {
          nest("em", i + 1, j, j + 1);
          continue;
        }
      }
    } else if (c === "~") {
      if (text[i + 1] === "~" && i + 2 < n && !isSpace(text[i + 2])) {
        const j = find("~~", i + 3);
        if (j < n) {
          nest("del", i + 2, j, j + 2);
          continue;
        }
      }
    } else if (c === "[") {
      const b = find("]", i + 1);
      if (b < n) {
        if (b !== tailAt) {
          tailAt = b;
          tail = linkTail(text, b);
        }
        if (tail) {
          flush();
          appendLink(parent, text.slice(i + 1, b), tail.href, text.slice(i, tail.end), depth);
          i = mark = tail.end;
          continue;
        }
      }
    } else if (c === "<") {
      LINK_SCHEME.lastIndex = i + 1;
      if (LINK_SCHEME.test(text)) {
        let j = LINK_SCHEME.lastIndex;
        while (j < n && text[j] !== "<" && text[j] !== ">" && !isSpace(text[j])) j += 1;
        work += j - i;
        if (text[j] === ">" && j > LINK_SCHEME.lastIndex) {
          flush();
          const href = text.slice(i + 1, j);
          appendLink(parent, href, href, text.slice(i, j + 1), depth);
          i = mark = j + 1;
          continue;
        }
      }
    }
    i += 1;
  }
  flush();
}

function appendLink(parent, label, href, whole, depth) {
  if (!SAFE_LINK.test(href)) {
    parent.appendChild(document.createTextNode(whole));
    return;
  }
  const a = el("a");
  a.setAttribute("href", href);
  a.setAttribute("rel", "noopener noreferrer nofollow");
  a.setAttribute("target", "_blank");
  inline(label || href, a, depth + 1);
  parent.appendChild(a);
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)/;
const BULLET = /^(\s*)([-*+])\s+([\s\S]*)$/;
const ORDERED = /^(\s*)(\d{1,9})[.)]\s+([\s\S]*)$/;
const QUOTE = /^ {0,3}>\s?([\s\S]*)$/;
const TABLE_CELL = /^:?-{2,}:?$/;

// "# Title ##": [level, text], or null. (By hand: a pattern with a lazy middle and a trailing
// \s*#*\s* takes time square in a line of spaces.)
function heading(line) {
  let k = 0;
  while (k < 3 && line[k] === " ") k += 1;
  let h = k;
  while (h < line.length && h - k < 7 && line[h] === "#") h += 1;
  if (h === k || h - k > 6 || !isSpace(line[h])) return null;
  let from = h;
  while (from < line.length && isSpace(line[from])) from += 1;
  let to = line.length;
  while (to > from && isSpace(line[to - 1])) to -= 1;
  while (to > from && line[to - 1] === "#") to -= 1;
  while (to > from && isSpace(line[to - 1])) to -= 1;
  const text = line.slice(from, to);
  return TERMINATOR.test(text) ? null : [h - k, text];
}

// "---", "* * *", "___": three or more of one of them, spaces between.
function isRule(line) {
  let k = 0;
  while (k < 3 && line[k] === " ") k += 1;
  const c = line[k];
  if (c !== "-" && c !== "*" && c !== "_") return false;
  let count = 0;
  for (let j = k; j < line.length; j += 1) {
    if (line[j] === c) count += 1;
    else if (!isSpace(line[j])) return false;
  }
  return count >= 3;
}

// A table's second line: "| --- | :-: |".
function isTableSep(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|")) s = s.slice(0, -1);
  return s.split("|").every((c) => TABLE_CELL.test(c.trim()));
}

function cells(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|")) s = s.slice(0, -1);
  return s.split("|").map((c) => c.trim());
}

// Blocks: fenced code, headings, rules, lists, quotes, tables, paragraphs.
function blocks(lines, parent, depth) {
  depth = depth || 0;
  if (depth > MAX_BLOCK_DEPTH) {
    const p = el("p");
    inline(lines.join("\n"), p);
    parent.appendChild(p);
    return;
  }
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    work += line.length + 1;
    let m;
    if (!line.trim()) {
      i += 1;
      continue;
    }
    if ((m = FENCE.exec(line))) {
      const fence = m[1];
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence)) {
        body.push(lines[i]);
        i += 1;
      }
      i += 1;
      const pre = el("pre");
      const code = el("code");
      code.textContent = body.join("\n");
      pre.appendChild(code);
      parent.appendChild(pre);
      continue;
    }
    if ((m = heading(line))) {
      const h = el("h" + m[0]);
      inline(m[1], h);
      parent.appendChild(h);
      i += 1;
      continue;
    }
    if (isRule(line)) {
      parent.appendChild(el("hr"));
      i += 1;
      continue;
    }
    if (QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
        inner.push(m[1]);
        i += 1;
      }
      const q = el("blockquote");
      blocks(inner, q, depth + 1);
      parent.appendChild(q);
      continue;
    }
    if (BULLET.test(line) || ORDERED.test(line)) {
      const ordered = !BULLET.test(line);
      const list = el(ordered ? "ol" : "ul");
      const pattern = ordered ? ORDERED : BULLET;
      const base = pattern.exec(line)[1].length;
      let item = null;
      while (i < lines.length) {
        const l = lines[i];
        const mm = pattern.exec(l);
        if (mm && mm[1].length <= base + 1) {
          item = { lines: [mm[3]] };
          const li = el("li");
          item.node = li;
          list.appendChild(li);
          item.all = [mm[3]];
          li._md = item.all;
          i += 1;
          continue;
        }
        if (item && l.trim() && /^\s+/.test(l)) {
          item.all.push(l.replace(/^\s{1,4}/, ""));
          i += 1;
          continue;
        }
        if (item && !l.trim() && i + 1 < lines.length && /^\s+\S/.test(lines[i + 1])) {
          item.all.push("");
          i += 1;
          continue;
        }
        break;
      }
      for (const li of list.children) {
        const body = li._md;
        if (body.length === 1) inline(body[0], li);
        else blocks(body, li, depth + 1);
      }
      parent.appendChild(list);
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && isTableSep(lines[i + 1])) {
      const table = el("table");
      const head = el("tr");
      for (const c of cells(line)) {
        const th = el("th");
        inline(c, th);
        head.appendChild(th);
      }
      table.appendChild(head);
      i += 2;
      while (i < lines.length && lines[i].includes("|") && lines[i].trim()) {
        const tr = el("tr");
        for (const c of cells(lines[i])) {
          const td = el("td");
          inline(c, td);
          tr.appendChild(td);
        }
        table.appendChild(tr);
        i += 1;
      }
      const wrap = el("div", "table");
      wrap.appendChild(table);
      parent.appendChild(wrap);
      continue;
    }
    const para = [];
    while (
      i < lines.length &&
      lines[i].trim() &&
      !FENCE.test(lines[i]) &&
      !heading(lines[i]) &&
      !QUOTE.test(lines[i]) &&
      !(para.length && (BULLET.test(lines[i]) || isRule(lines[i])))
    ) {
      para.push(lines[i].trim());
      i += 1;
    }
    const p = el("p");
    inline(para.join("\n"), p);
    parent.appendChild(p);
  }
}

// eslint-disable-next-line no-unused-vars
function renderMarkdown(text) {
  const root = el("div", "md");
  work = 0;
  blocks(String(text).replace(/\r\n?/g, "\n").split("\n"), root, 0);
  renderMarkdown.work = work; // characters looked at (tests/web/test_md.py)
  return root;
}
