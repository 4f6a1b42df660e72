// A small, safe markdown renderer: it builds DOM nodes with textContent only, so nothing an
// agent writes is ever parsed as HTML. Blocks: paragraphs, headings, fenced code, lists,
// block quotes, rules. Inline: `code`, **bold**, *italic*, [links](http...) (rel=noopener,
// new tab; only http, https and mailto), bare http(s) URLs.

const SAFE_URL = /^(https?:\/\/|mailto:|\/)/i;

export function renderMarkdown(text) {
  const root = document.createDocumentFragment();
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```|~~~)\s*([\w+-]*)\s*$/);
    if (fence) {
      const body = [];
      i += 1;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      i += 1; // the closing fence (or the end)
      const pre = el("pre", "md-code");
      const code = el("code");
      if (fence[2]) code.dataset.lang = fence[2];
      code.textContent = body.join("\n");
      pre.append(code);
      root.append(pre);
      continue;
    }
    if (!line.trim()) { i += 1; continue; }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    if (heading) {
      const h = el(`h${Math.min(heading[1].length + 2, 6)}`, "md-h");
      inline(h, heading[2]);
      root.append(h);
      i += 1;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { root.append(el("hr")); i += 1; continue; }
    if (/^\s*>/.test(line)) {
      const quoted = [];
      while (i < lines.length && /^\s*>/.test(lines[i])) quoted.push(lines[i++].replace(/^\s*>\s?/, ""));
      const quote = el("blockquote");
      quote.append(renderMarkdown(quoted.join("\n")));
      root.append(quote);
      continue;
    }
    const item = /^\s*([-*+]|\d+[.)])\s+/;
    if (item.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = el(ordered ? "ol" : "ul");
      while (i < lines.length && item.test(lines[i])) {
        const li = el("li");
        let content = lines[i++].replace(item, "");
        while (i < lines.length && /^\s{2,}\S/.test(lines[i]) && !item.test(lines[i])) content += " " + lines[i++].trim();
        inline(li, content);
        list.append(li);
      }
      root.append(list);
      continue;
    }
    const paragraph = [];
    while (i < lines.length && lines[i].trim() && !/^(#{1,6}\s|\s*```|\s*~~~|\s*>)/.test(lines[i]) && !item.test(lines[i])) {
      paragraph.push(lines[i++]);
    }
    const p = el("p");
    paragraph.forEach((part, index) => {
      if (index) p.append(el("br"));
      inline(p, part);
    });
    root.append(p);
  }
  return root;
}

function el(tag, className) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  return node;
}

// Inline spans, left to right: the earliest match of any rule wins.
const RULES = [
  ["code", /`([^`]+)`/],
  ["link", /\[([^\]]+)\]\(((?:[^()\s]|\([^()\s]*\))+)\)/], // one level of (parens) in the URL
  ["bold", /\*\*([^*]+)\*\*|__([^_]+)__/],
  ["italic", /\*([^*\s][^*]*)\*|\b_([^_\s][^_]*)_\b/],
  ["url", /\bhttps?:\/\/[^\s<>()]+[^\s<>().,;:!?'"]/],
];

function inline(parent, text) {
  let rest = text;
  while (rest) {
    let best = null;
    for (const [kind, re] of RULES) {
      const m = re.exec(rest);
      if (m && (best === null || m.index < best.m.index)) best = { kind, m };
    }
    if (!best) { parent.append(document.createTextNode(rest)); return; }
    const { kind, m } = best;
    if (m.index) parent.append(document.createTextNode(rest.slice(0, m.index)));
    if (kind === "code") {
      const code = el("code");
      code.textContent = m[1];
      parent.append(code);
    } else if (kind === "link" || kind === "url") {
      const href = kind === "link" ? m[2] : m[0];
      const label = kind === "link" ? m[1] : m[0];
      if (SAFE_URL.test(href)) {
        parent.append(link(href, label));
      } else {
        parent.append(document.createTextNode(label)); // javascript: and the like: text only
      }
    } else {
      const node = el(kind === "bold" ? "strong" : "em");
      inline(node, m[1] ?? m[2]);
      parent.append(node);
    }
    rest = rest.slice(m.index + m[0].length);
  }
}

export function link(href, label) {
  const a = el("a");
  a.href = href;
  a.textContent = label;
  a.rel = "noopener noreferrer";
  a.target = "_blank";
  return a;
}
