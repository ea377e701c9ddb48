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

// Inline: `code`, **strong**, *em* / _em_, ~~del~~, [text](url), <https://autolink>.
function inline(text, parent) {
  let i = 0;
  let plain = "";
  const flush = () => {
    if (plain) parent.appendChild(document.createTextNode(plain));
    plain = "";
  };
  while (i < text.length) {
    const c = text[i];
    const rest = text.slice(i);
    let m;
    if (c === "\\" && i + 1 < text.length && /[\\`*_{}\[\]()#+\-.!~<>|]/.test(text[i + 1])) {
      plain += text[i + 1];
      i += 2;
      continue;
    }
    if (c === "`" && (m = /^(`+)([\s\S]*?[^`])\1(?!`)/.exec(rest))) {
      flush();
      const code = el("code");
      code.textContent = m[2].trim() ? m[2].replace(/^ (.*) $/, "$1") : m[2];
      parent.appendChild(code);
      i += m[0].length;
      continue;
    }
    if ((c === "*" || c === "_") && (m = /^(\*\*|__)(?=\S)([\s\S]*?\S)\1/.exec(rest))) {
      flush();
      const strong = el("strong");
      inline(m[2], strong);
      parent.appendChild(strong);
      i += m[0].length;
      continue;
    }
    if ((c === "*" || c === "_") && (m = /^(\*|_)(?=\S)([\s\S]*?\S)\1(?![*_])/.exec(rest))) {
      if (c === "*" || !/\w/.test(text[i - 1] || "")) {
        flush();
        const em = el("em");
        inline(m[2], em);
        parent.appendChild(em);
        i += m[0].length;
        continue;
      }
    }
    if (c === "~" && (m = /^~~(?=\S)([\s\S]*?\S)~~/.exec(rest))) {
      flush();
      const del = el("del");
      inline(m[1], del);
      parent.appendChild(del);
      i += m[0].length;
      continue;
    }
    if (c === "[" && (m = /^\[([^\]]*)\]\(\s*<?([^()\s>]*(?:\([^()\s]*\)[^()\s>]*)*)>?(?:\s+"[^"]*")?\s*\)/.exec(rest))) {
      flush();
      appendLink(parent, m[1], m[2], m[0]);
      i += m[0].length;
      continue;
    }
    if (c === "<" && (m = /^<((?:https?:\/\/|mailto:)[^\s<>]+)>/i.exec(rest))) {
      flush();
      appendLink(parent, m[1], m[1], m[0]);
      i += m[0].length;
      continue;
    }
    if (c === "\n") {
      plain += "\n";
      i += 1;
      continue;
    }
    plain += c;
    i += 1;
  }
  flush();
}

function appendLink(parent, label, href, whole) {
  if (!SAFE_LINK.test(href)) {
    parent.appendChild(document.createTextNode(whole));
    return;
  }
  const a = el("a");
  a.setAttribute("href", href);
  a.setAttribute("rel", "noopener noreferrer nofollow");
  a.setAttribute("target", "_blank");
  inline(label || href, a);
  parent.appendChild(a);
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const BULLET = /^(\s*)([-*+])\s+(.*)$/;
const ORDERED = /^(\s*)(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/;

function cells(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|")) s = s.slice(0, -1);
  return s.split("|").map((c) => c.trim());
}

// Blocks: fenced code, headings, rules, lists, quotes, tables, paragraphs.
function blocks(lines, parent) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
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
    if ((m = HEADING.exec(line))) {
      const h = el("h" + m[1].length);
      inline(m[2], h);
      parent.appendChild(h);
      i += 1;
      continue;
    }
    if (RULE.test(line)) {
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
      blocks(inner, q);
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
        else blocks(body, li);
      }
      parent.appendChild(list);
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1])) {
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
      !HEADING.test(lines[i]) &&
      !QUOTE.test(lines[i]) &&
      !(para.length && (BULLET.test(lines[i]) || RULE.test(lines[i])))
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
  blocks(String(text).replace(/\r\n?/g, "\n").split("\n"), root);
  return root;
}
