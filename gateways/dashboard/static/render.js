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

// How long until a next run: "in 42 s", "in 5 min", "in 3 h 20 min", "in 2 d 4 h".
export function inTime(seconds) {
  const s = Math.round(seconds);
  if (s <= 0) return "due now";
  if (s < 60) return `in ${s} s`;
  const m = Math.round(s / 60);
  if (m < 60) return `in ${m} min`;
  if (m < 1440) return `in ${Math.floor(m / 60)} h ${m % 60} min`;
  return `in ${Math.floor(m / 1440)} d ${Math.floor((m % 1440) / 60)} h`;
}

export function utcTime(ms) {
  return `${new Date(ms).toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

// An agent's schedules (the schedules' record): each with its timing, then its next run, or "paused".
function scheduleList(schedules, now) {
  return el("ul", { class: "schedules", title: "scheduled runs" }, schedules.map((s) =>
    el("li", { class: "schedule", "data-schedule": s.name, "data-paused": s.paused ? "true" : null },
      el("span", { class: "schedule-name", text: s.name }),
      el("span", { class: "schedule-when", text: s.when }),
      s.paused
        ? el("span", { class: "badge plain", text: "paused" })
        : el("span", { class: "schedule-next", title: "the next tick a scheduler waits for" },
          `next ${utcTime(s.nextTick)} (`, el("span", { "data-next-tick": s.nextTick, text: inTime(s.nextTick / 1000 - now) }), ")"))));
}

// Long ids keep both ends: generated ids share their prefix (a2a_subtask_...), not their end.
export function shortId(id) {
  return id.length <= 14 ? id : `${id.slice(0, 5)}…${id.slice(-7)}`;
}

const RATE_LABELS = [["requests", "req"], ["answers", "ans"], ["errors", "err"], ["refusals", "ref"]];

export function cardTile(card, rates, usage, schedules, now) {
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
    if (usage) {
      const cost = typeof usage.costUsd === "number" ? ` · $${usage.costUsd.toFixed(4)}` : "";
      tile.append(el("p", { class: "usage", "data-usage": card.name, title: "LLM tokens and cost of the answers seen", text: `${usage.tokens} tokens${cost}` }));
    }
    if (schedules && schedules.length) tile.append(scheduleList(schedules, now));
  }
  return tile;
}

export function stateBadge(state) {
  return el("span", { class: "state", "data-state": state, text: state });
}

export function taskRow(task, now, selected, onSelect) {
  const waiting = (task.approvals || []).map((a) => `${a.tool} ${a.arguments}`).join("; ");
  const last = waiting && task.state === "input-required" ? `waiting for approval: ${waiting}` : task.lastText || "";
  return el(
    "tr",
    { "data-task-key": task.key, "data-task-id": task.taskId, class: selected ? "selected" : null, onclick: () => onSelect(task.key) },
    el("td", {}, stateBadge(task.state)),
    el("td", { text: task.agent }),
    el("td", { class: "mono", title: task.chain.length ? `via ${task.chain.join(" → ")}` : null, text: task.delegatedBy || task.caller }),
    el("td", { "data-started": task.started, text: age(now - task.started) }),
    el("td", { class: "mono", title: task.taskId, text: shortId(task.taskId) }),
    el("td", { title: last, text: last, "data-approval": waiting && task.state === "input-required" ? "pending" : null }),
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

// The workflow of the selected task (the task itself, or the workflow task a node's sub-task
// belongs to), drawn as its graph: nodes in columns by depth, arrows from each dependency,
// each node with its state (from the workflow's node marks, else from its sub-task).
const SVG = "http://www.w3.org/2000/svg";
const BOX_W = 150, BOX_H = 46, GAP_X = 50, GAP_Y = 14;

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

export function workflowOf(tasks, cards, selectedKey) {
  let task = tasks.get(selectedKey);
  if (!task) return null;
  const card = (t) => cards.get(`agent/${t.agent}`);
  if (!(card(task) && card(task).workflow) && task.workflowNode && task.parentTaskId) {
    task = [...tasks.values()].find((t) => t.taskId === task.parentTaskId) || task;
  }
  const found = card(task);
  return found && found.workflow ? { task, nodes: found.workflow } : null;
}

export function workflowGraph(tasks, cards, selectedKey, onSelect) {
  const workflow = workflowOf(tasks, cards, selectedKey);
  if (!workflow) return el("p", { class: "empty", text: "Not a workflow." });
  const { task, nodes } = workflow;
  const ids = new Set(nodes.map((n) => n.id));
  const depth = new Map();
  const depthOf = (node, seen = new Set()) => {
    if (depth.has(node.id)) return depth.get(node.id);
    if (seen.has(node.id)) return 0; // a card is data from the wire: never trust it to be acyclic
    seen.add(node.id);
    const deps = node.dependsOn.filter((d) => ids.has(d)).map((d) => depthOf(nodes.find((n) => n.id === d), seen));
    const value = deps.length ? Math.max(...deps) + 1 : 0;
    depth.set(node.id, value);
    return value;
  };
  const columns = [];
  for (const node of nodes) (columns[depthOf(node)] ||= []).push(node);
  const subTasks = [...tasks.values()].filter((t) => t.parentTaskId === task.taskId && t.workflowNode);
  const seenState = (id) => {
    if (task.nodeStates && task.nodeStates[id]) return task.nodeStates[id];
    const sub = subTasks.filter((t) => t.workflowNode === id).pop();
    if (sub) return sub.state === "submitted" ? "running" : sub.state;
    return "pending";
  };
  // A node still running or pending when its workflow ended was canceled with it, or never ran.
  const stateOf = (id) => {
    const seen = seenState(id);
    if (!task.final || !["running", "retrying", "pending"].includes(seen)) return seen;
    return seen === "pending" ? "not run" : "canceled";
  };
  const place = new Map();
  columns.forEach((column, x) => column.forEach((node, y) => place.set(node.id, { x: x * (BOX_W + GAP_X), y: y * (BOX_H + GAP_Y) })));
  const width = columns.length * (BOX_W + GAP_X) - GAP_X;
  const height = Math.max(...columns.map((c) => c.length)) * (BOX_H + GAP_Y) - GAP_Y;
  const drawing = svg("svg", { class: "workflow", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `workflow ${task.agent}` });
  const marker = svg("marker", { id: "wf-arrow", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 8, markerHeight: 8, orient: "auto" });
  marker.append(svg("path", { d: "M0,0 L8,4 L0,8 z", class: "arrow-head" }));
  const defs = svg("defs");
  defs.append(marker);
  drawing.append(defs);
  // An arrow per dependency; a switch's arrow to each node it may select carries the case
  // (its condition, or "else"), also where the card's dependsOn leaves it out.
  const caseOf = new Map(); // "switch>target" -> the case's label
  for (const node of nodes) {
    for (const c of Array.isArray(node.cases) ? node.cases : []) {
      const target = c.else ?? c.then;
      if (typeof target === "string") caseOf.set(`${node.id}>${target}`, c.else !== undefined ? "else" : `when ${c.when}`);
    }
  }
  const edges = new Set();
  for (const node of nodes) for (const dep of node.dependsOn) edges.add(`${dep}>${node.id}`);
  for (const key of caseOf.keys()) edges.add(key);
  for (const key of edges) {
    const [dep, id] = key.split(">");
    const from = place.get(dep), to = place.get(id);
    if (!from || !to) continue;
    const label = caseOf.get(key);
    const line = svg("line", { class: label ? "edge case" : "edge", x1: from.x + BOX_W, y1: from.y + BOX_H / 2, x2: to.x, y2: to.y + BOX_H / 2, "marker-end": "url(#wf-arrow)" });
    if (label) {
      line.setAttribute("data-case", label);
      line.append(svg("title", {}, `${dep} → ${id}: ${label}`));
    }
    drawing.append(line);
  }
  for (const node of nodes) {
    const { x, y } = place.get(node.id);
    const nodeState = stateOf(node.id);
    const sub = subTasks.filter((t) => t.workflowNode === node.id).pop();
    const cases = Array.isArray(node.cases) ? node.cases : [];
    const what = cases.length ? `${cases.length} cases` : node.target;
    const detail = cases.length ? `: ${cases.map((c) => (c.else !== undefined ? `else ${c.else}` : `${c.when} → ${c.then}`)).join("; ")}` : ` ${what}`;
    const box = svg("g", { class: "wf-node", "data-workflow-node": node.id, "data-state": nodeState, transform: `translate(${x},${y})` });
    box.append(
      svg("rect", { width: BOX_W, height: BOX_H, rx: 6 }),
      svg("text", { x: 8, y: 18, class: "wf-id" }, node.id),
      svg("text", { x: 8, y: 36, class: "wf-meta" }, `${nodeState} · ${node.kind}${what ? " " + what : ""}`.slice(0, 26)),
      svg("title", {}, `${node.id}: ${node.kind}${detail} (${nodeState})${node.dependsOn.length ? " after " + node.dependsOn.join(", ") : ""}`),
    );
    if (sub) box.addEventListener("click", () => onSelect(sub.key));
    drawing.append(box);
  }
  return el("div", { class: "workflow-graph", "data-workflow-task": task.key }, el("p", { class: "muted", text: `${task.agent} · ${task.state}` }), drawing);
}
