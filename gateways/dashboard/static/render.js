// Drawing the dashboard's state into the page. Text from the mesh (cards, messages) is only
// ever set as text (never as HTML): a card's description must not run in an operator's browser.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function age(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  if (s >= 3600) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  if (s >= 60) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${s}s`;
}

// Long ids keep both ends: generated ids share their prefix (a2a_subtask_...), not their end.
export function shortId(id) {
  return id.length <= 14 ? id : `${id.slice(0, 5)}…${id.slice(-7)}`;
}

const RATE_LABELS = [["requests", "req"], ["answers", "ans"], ["errors", "err"], ["refusals", "ref"]];

export function cardTile(card, rates) {
  const badges = [];
  badges.push(el("span", { class: card.streaming ? "badge good" : "badge plain", text: card.streaming ? "streaming" : "no streaming" }));
  if (card.replicas > 1) badges.push(el("span", { class: "badge", text: `${card.replicas} replicas` }));
  badges.push(el("span", { class: card.signed ? "badge good" : "badge plain", text: card.signed ? "signed" : "unsigned" }));
  const tile = el(
    "article",
    { class: "card", "data-kind": card.kind, "data-agent": card.kind === "agent" ? card.name : null, "data-gateway": card.kind === "gateway" ? card.name : null },
    el("div", { class: "card-head" }, el("span", { class: "card-name", text: card.name }), el("span", { class: "card-version", text: card.version ? `v${card.version}` : "" })),
    el("p", { class: "card-desc", text: card.description || "" }),
    el("div", { class: "badges" }, badges),
  );
  if (card.skills.length) {
    tile.append(el("div", { class: "skills" }, card.skills.map((s) => el("span", { class: "skill", title: (s.tags || []).join(", "), text: s.name || s.id }))));
  }
  if (card.kind === "agent") {
    const counts = rates || {};
    tile.append(
      el("div", { class: "rates", title: "last minute" },
        RATE_LABELS.map(([key, label]) => {
          const value = counts[key] || 0;
          return el("div", { class: `rate ${key}${value ? "" : " zero"}`, "data-rate": key }, el("b", { text: value }), el("span", { text: label }));
        })),
    );
  }
  return tile;
}

export function stateBadge(state) {
  return el("span", { class: "state", "data-state": state, text: state });
}

export function taskRow(task, now, selected, onSelect) {
  const last = task.lastText || "";
  return el(
    "tr",
    { "data-task-key": task.key, "data-task-id": task.taskId, class: selected ? "selected" : null, onclick: () => onSelect(task.key) },
    el("td", {}, stateBadge(task.state)),
    el("td", { text: task.agent }),
    el("td", { class: "mono", title: task.chain.length ? `via ${task.chain.join(" → ")}` : null, text: task.delegatedBy || task.caller }),
    el("td", { "data-started": task.started, text: age(now - task.started) }),
    el("td", { class: "mono", title: task.taskId, text: shortId(task.taskId) }),
    el("td", { title: last, text: last }),
  );
}

export function timelineItems(task) {
  if (!task) return [el("li", { class: "empty", text: "Select a task." })];
  const items = task.events.map((event) =>
    el("li", { "data-event-kind": event.kind },
      el("span", { class: "when", text: `+${(event.at - task.started).toFixed(2)}s` }),
      el("span", { class: "kind", text: event.kind + (event.name ? ` ${event.name}` : "") }),
      event.state ? stateBadge(event.state) : null,
      event.text ? el("span", { class: "text", text: event.text }) : null,
      (event.files || []).map((file) => el("a", { class: "file", href: file.href, download: true, text: file.name }))));
  if (task.droppedEvents) items.unshift(el("li", { class: "empty", text: `${task.droppedEvents} earlier events not kept` }));
  return items;
}

// The delegation tree of the selected task: from its root (following parentTaskId up), every
// sub-task whose parentTaskId is a node's task id, drawn nested.
export function delegationTree(tasks, selectedKey, onSelect) {
  const selected = tasks.get(selectedKey);
  if (!selected) return el("p", { class: "empty", text: "Select a task." });
  const byId = new Map();
  for (const task of tasks.values()) byId.set(task.taskId, task);
  let root = selected;
  const seen = new Set();
  while (root.parentTaskId && byId.has(root.parentTaskId) && !seen.has(root.key)) {
    seen.add(root.key);
    root = byId.get(root.parentTaskId);
  }
  const children = new Map();
  for (const task of tasks.values()) {
    if (!task.parentTaskId) continue;
    if (!children.has(task.parentTaskId)) children.set(task.parentTaskId, []);
    children.get(task.parentTaskId).push(task);
  }
  const drawn = new Set();
  const node = (task) => {
    drawn.add(task.key);
    const below = (children.get(task.taskId) || []).filter((t) => !drawn.has(t.key));
    return el("li", { "data-tree-node": task.agent, "data-task-key": task.key },
      el("span", { class: task.key === selectedKey ? "node selected" : "node", onclick: () => onSelect(task.key) },
        el("b", { text: task.agent }), stateBadge(task.state)),
      below.length ? el("ul", {}, below.map(node)) : null);
  };
  const tree = el("ul", {}, node(root));
  if (drawn.size === 1) return el("div", {}, tree, el("p", { class: "empty", text: "No sub-tasks." }));
  return tree;
}
