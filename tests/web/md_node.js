// Runs the page's md.js under node with a small DOM of its own, for tests/web/test_md.py and
// bench/page.py. Reads {"inputs": [...], "repeat": N} on stdin; prints, for each input, the HTML
// it renders to, the work md.js counted, and the milliseconds of one render and of a JSON.parse of
// an input of the same size (the baseline).
"use strict";
const fs = require("fs");
const vm = require("vm");

class Elem {
  constructor(tag) {
    this.tag = tag;
    this.className = "";
    this.attrs = [];
    this.kids = [];
    this.classList = { add: (c) => (this.className = this.className ? this.className + " " + c : c) };
  }
  get children() {
    return this.kids.filter((k) => k instanceof Elem);
  }
  appendChild(node) {
    this.kids.push(node);
    return node;
  }
  setAttribute(name, value) {
    this.attrs.push([name, String(value)]);
  }
  set textContent(text) {
    this.kids = [{ text: String(text) }];
  }
}

const escape = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

function html(node) {
  if (!(node instanceof Elem)) return escape(node.text);
  const cls = node.className ? ` class="${node.className}"` : "";
  const attrs = node.attrs.map(([k, v]) => ` ${k}="${escape(v)}"`).join("");
  return `<${node.tag}${cls}${attrs}>${node.kids.map(html).join("")}</${node.tag}>`;
}

const document = { createElement: (tag) => new Elem(tag), createTextNode: (text) => ({ text: String(text) }) };
const context = vm.createContext({ document });
vm.runInContext(fs.readFileSync(process.argv[2], "utf8"), context, { filename: "md.js" });
const request = JSON.parse(fs.readFileSync(0, "utf8"));
const repeat = request.repeat || 1;
const out = [];
for (const input of request.inputs) {
  let node = null;
  const started = process.hrtime.bigint();
  for (let k = 0; k < repeat; k += 1) node = context.renderMarkdown(input);
  const ms = Number(process.hrtime.bigint() - started) / 1e6 / repeat;
  const same = JSON.stringify(input);
  const base = process.hrtime.bigint();
  for (let k = 0; k < repeat; k += 1) JSON.parse(same);
  const baseMs = Number(process.hrtime.bigint() - base) / 1e6 / repeat;
  out.push({ html: html(node), work: context.renderMarkdown.work, ms, json_ms: baseMs });
}
process.stdout.write(JSON.stringify(out));
