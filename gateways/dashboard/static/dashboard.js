// The dashboard page: follows /ui/api/events (SSE) and keeps the picture in step; sends with
// /ui/api/send and shows that stream as it comes. Same-origin requests carry the credentials
// the browser holds for the gateway (its Basic authentication, say).
import { age, cardTile, delegationTree, el, inTime, shortId, taskRow, timelineItems, workflowGraph } from "./render.js";

const state = {
  cards: new Map(), // "kind/name" -> card
  refused: new Map(), // name -> {name, kind, why}: cards the trust store refused, never shown as agents
  tasks: new Map(), // key -> task (events included)
  rates: {},
  usage: {},
  schedules: {}, // agent -> [{name, when, nextTick (Unix ms), paused}]: its schedules a scheduler runs
  skew: 0, // server clock minus ours, seconds
  selected: null,
  follow: null, // the task id of the message just sent: selected as soon as it shows
  maxTasks: 200,
  maxEvents: 100,
};

const $ = (id) => document.getElementById(id);
const now = () => Date.now() / 1000 + state.skew;

// ---------------------------------------------------------------- the live feed

function connect() {
  const source = new EventSource("api/events");
  const on = (kind, handle) => source.addEventListener(kind, (e) => handle(JSON.parse(e.data)));
  source.onopen = () => setConnection("live", "live");
  source.onerror = () => setConnection("down", "reconnecting…");
  on("snapshot", (snap) => {
    state.skew = snap.now - Date.now() / 1000;
    state.cards = new Map(snap.cards.map((c) => [`${c.kind}/${c.name}`, c]));
    state.tasks = new Map(snap.tasks.map((t) => [t.key, withLast(t)]));
    state.rates = snap.rates;
    state.usage = snap.usage || {};
    state.schedules = snap.schedules || {};
    state.maxTasks = snap.bounds.maxTasks;
    state.maxEvents = snap.bounds.maxEventsPerTask;
    $("bounds").textContent = `keeps ${snap.bounds.maxTasks} tasks · ${snap.bounds.maxEventsPerTask} events each · rates over ${snap.bounds.rateWindowS}s`;
    const blind = Object.keys(snap.blindSpots);
    $("blind").hidden = blind.length === 0;
    $("blind").textContent = blind.length ? `The broker does not let the dashboard read ${blind.join(", ")}: tasks there are not shown.` : "";
    state.refused = new Map((snap.refused || []).map((r) => [r.name, r]));
    drawRefused();
    drawCards();
    drawTasks();
  });
  on("refused", (r) => { if (r.why === null) state.refused.delete(r.name); else state.refused.set(r.name, r); drawRefused(); });
  on("card", (card) => { state.cards.set(`${card.kind}/${card.name}`, card); drawCards(); drawSendTargets(); });
  on("gone", (gone) => { state.cards.delete(`${gone.kind}/${gone.name}`); drawCards(); drawSendTargets(); });
  on("task", ({ task, event }) => {
    const known = state.tasks.get(task.key);
    const events = known ? known.events : [];
    events.push(event);
    if (events.length > state.maxEvents) events.splice(0, events.length - state.maxEvents);
    state.tasks.delete(task.key); // most recent last, as the server keeps them
    state.tasks.set(task.key, withLast({ ...task, events }));
    if (state.follow && task.taskId === state.follow && state.selected !== task.key) state.selected = task.key;
    scheduleTasks();
  });
  on("taskGone", ({ key }) => { state.tasks.delete(key); scheduleTasks(); });
  on("rates", ({ rates }) => { state.rates = rates; drawCards(); });
  on("usage", ({ agent, usage }) => { state.usage[agent] = usage; drawCards(); });
  on("schedules", ({ schedules }) => { state.schedules = schedules; drawCards(); });
  on("restart", () => { source.close(); connect(); });
  on("problem", ({ reason }) => setConnection("down", reason));
}

function withLast(task) {
  const last = task.events[task.events.length - 1];
  task.lastText = last ? last.text || last.state || last.kind : "";
  return task;
}

function setConnection(kind, text) {
  const node = $("connection");
  node.dataset.state = kind;
  node.textContent = text;
}

// ---------------------------------------------------------------- drawing

function drawRefused() {
  const refused = [...state.refused.values()].sort((a, b) => a.name.localeCompare(b.name));
  const box = $("refused");
  box.hidden = refused.length === 0;
  box.replaceChildren(...(refused.length ? [
    el("strong", { text: `Refused cards (${refused.length}): not signed by a trusted key of their name, so not agents.` }),
    el("ul", {}, refused.map((r) => el("li", { class: "refused-card", text: `${r.name} (${r.kind}): ${r.why}` }))),
  ] : []));
}

function drawCards() {
  const cards = [...state.cards.values()].sort((a, b) => a.name.localeCompare(b.name));
  for (const kind of ["agent", "gateway"]) {
    const mine = cards.filter((c) => c.kind === kind);
    const box = $(kind === "agent" ? "agents" : "gateways");
    $(kind === "agent" ? "agent-count" : "gateway-count").textContent = mine.length;
    box.replaceChildren(...(mine.length ? mine.map((c) => cardTile(c, state.rates[c.name], state.usage[c.name], state.schedules[c.name], now())) : [el("p", { class: "empty", text: kind === "agent" ? "No agents on the mesh." : "No gateways." })]));
  }
  drawSendTargets();
}

function drawSendTargets() {
  const select = $("send-agent");
  const chosen = select.value;
  const names = [...state.cards.values()].filter((c) => c.kind === "agent").map((c) => c.name).sort();
  const current = [...select.options].map((o) => o.value);
  if (current.join("\n") === names.join("\n")) return;
  select.replaceChildren(...names.map((name) => el("option", { value: name, text: name })));
  if (names.includes(chosen)) select.value = chosen;
}

// Changes come in bursts (a stream's events): draw at most once a frame.
let tasksPending = false;
function scheduleTasks() {
  if (tasksPending) return;
  tasksPending = true;
  requestAnimationFrame(() => { tasksPending = false; drawTasks(); });
}

function drawTasks() {
  const tasks = [...state.tasks.values()].reverse(); // most recent first
  $("task-count").textContent = tasks.length;
  const t = now();
  $("tasks").replaceChildren(...(tasks.length ? tasks.map((task) => taskRow(task, t, task.key === state.selected, select)) : [el("tr", { class: "empty-row" }, el("td", { colspan: 6, text: "No tasks seen yet." }))]));
  drawDetail();
}

function drawDetail() {
  const task = state.tasks.get(state.selected);
  const timeline = $("timeline");
  // Keep following the end of a stream, unless the reader scrolled up to look at something.
  const atEnd = timeline.scrollTop + timeline.clientHeight >= timeline.scrollHeight - 8;
  const sameTask = timeline.dataset.task === (task ? task.key : "");
  $("timeline-title").textContent = task ? `${task.agent} · ${shortId(task.taskId)}` : "";
  timeline.dataset.task = task ? task.key : "";
  timeline.replaceChildren(...timelineItems(task));
  if (!sameTask || atEnd) timeline.scrollTop = timeline.scrollHeight;
  $("tree").replaceChildren(delegationTree(state.tasks, state.selected, select));
  $("workflow").replaceChildren(workflowGraph(state.tasks, state.cards, state.selected, select));
}

// Ages and times to the next runs move on their own: only those cells change every second.
function tickAges() {
  const t = now();
  for (const cell of document.querySelectorAll("#tasks [data-started]")) cell.textContent = age(t - Number(cell.dataset.started));
  for (const cell of document.querySelectorAll("#agents [data-next-tick]")) cell.textContent = inTime(Number(cell.dataset.nextTick) / 1000 - t);
}

function select(key) {
  state.selected = key;
  drawTasks();
}

// ---------------------------------------------------------------- sending

async function send(event) {
  event.preventDefault();
  const agent = $("send-agent").value;
  const text = $("send-text").value;
  const output = $("send-output");
  if (!agent || !text.trim()) {
    output.textContent = agent ? "Type a message first." : "No agent to send to.";
    return;
  }
  $("send-button").disabled = true;
  output.textContent = `→ ${agent}: ${text}\n`;
  try {
    const response = await fetch("api/send", {
      method: "POST",
      credentials: "same-origin",
      // The session's CSRF token when signed in through /signin (the page's <meta>).
      headers: { "content-type": "application/json", "x-csrf-token": document.querySelector('meta[name="csrf-token"]')?.content || "" },
      body: JSON.stringify({ agent, text }),
    });
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      const why = typeof body.error === "string" ? body.error : body.error?.message || response.statusText;
      output.textContent += `refused (${response.status}): ${why}\n`;
      return;
    }
    for await (const [kind, data] of sseEvents(response.body)) {
      if (kind === "item") {
        const id = data.taskId || (data.kind === "task" ? data.id : null);
        if (id && state.follow !== id) {
          state.follow = id;
          const key = [...state.tasks.values()].find((t) => t.taskId === id)?.key;
          if (key) select(key);
        }
        output.textContent += describe(data) + "\n";
      } else if (kind === "error") output.textContent += `error: ${data.reason}\n`;
      else if (kind === "end") output.textContent += "— end of stream\n";
      output.scrollTop = output.scrollHeight;
    }
  } catch (error) {
    output.textContent += `failed: ${error}\n`;
  } finally {
    $("send-button").disabled = false;
  }
}

function describe(item) {
  const text = (parts) => (parts || []).map((p) => p.text ?? JSON.stringify(p.data ?? "")).join(" ").trim();
  if (item.kind === "status-update") return `[${item.status.state}] ${text(item.status.message?.parts)}`;
  if (item.kind === "artifact-update") return `[artifact ${item.artifact.name || ""}] ${text(item.artifact.parts)}`;
  if (item.kind === "task") return `[task ${item.status.state}] ${text(item.status.message?.parts)}`;
  if (item.kind === "message") return `[message] ${text(item.parts)}`;
  return JSON.stringify(item);
}

async function* sseEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let kind = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) kind = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (data.length) yield [kind, JSON.parse(data.join("\n"))];
    }
  }
}

setInterval(tickAges, 1000);
$("send-form").addEventListener("submit", send);
connect();
