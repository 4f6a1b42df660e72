// The chat page: conversations with the mesh's agents as the signed-in user. Talks only to
// this gateway (same origin, session cookie, the page's CSRF token on every POST); renders
// agents' text with the safe markdown renderer (never innerHTML).

import { link, renderMarkdown } from "./markdown.js";

const $ = (id) => document.getElementById(id);
const CSRF = document.querySelector('meta[name="csrf-token"]').content;
const ROOT = document.body.dataset.root || "";
const API = "api/conversations";
const TERMINAL = new Set(["completed", "failed", "canceled", "rejected"]);
const MAX_FILE_BYTES = 700_000; // what fits a request with its base64 (the gateway's body limit)

const state = {
  conversations: [],
  current: null, // {id, agent, contextId, title}
  running: null, // {renderer, controller}
  files: [], // [{name, mimeType, bytes}]
  answers: [], // the Answer of each agent turn shown, in order
};

// ---------------------------------------------------------------- requests

async function api(path, options = {}) {
  const headers = { "x-csrf-token": CSRF, ...(options.body ? { "content-type": "application/json" } : {}) };
  const response = await fetch(path, { credentials: "same-origin", ...options, headers });
  if (response.status === 401) {
    location.href = `${ROOT}/signin?next=${encodeURIComponent(location.pathname)}`;
    throw new Error("signed out");
  }
  return response;
}

async function problem(response) {
  const body = await response.json().catch(() => ({}));
  const error = body.error;
  return typeof error === "string" ? error : error?.message || `${response.status} ${response.statusText}`;
}

// Reads an SSE body: calls onEvent(name, data) per event.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (data.length) onEvent(name, JSON.parse(data.join("\n")));
    }
  }
}

// ---------------------------------------------------------------- rendering an answer

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function textOf(message) {
  return (message?.parts || []).filter((p) => p.kind === "text").map((p) => p.text).join("");
}

// A link an agent gave that may be followed: this gateway's paths, http and https.
function safeUrl(uri) {
  return /^(https?:\/\/|\/(?!\/))/i.test(String(uri));
}

function pretty(value) {
  const text = typeof value === "string" ? value : JSON.stringify(value, null, 2);
  return text.length > 4000 ? text.slice(0, 4000) + "…" : text;
}

// One agent turn: its steps (tools, peers, workflow nodes), its text, artifacts and state.
class Answer {
  constructor(seq) {
    this.seq = seq;
    this.taskId = null;
    this.state = "submitted";
    this.streamed = "";
    this.finalText = null;
    this.steps = new Map();
    this.artifacts = new Map(); // artifactId -> {parts, box}: chunks append or replace (A2A's append)
    this.node = el("li", "turn agent");
    this.node.dataset.seq = seq;
    const head = el("div", "turn-head");
    this.badge = el("span", "badge", "working");
    head.append(el("span", "who-label", "Agent"), this.badge);
    this.stepList = el("div", "steps");
    this.text = el("div", "text");
    this.text.setAttribute("aria-live", "polite");
    this.files = el("div", "artifacts");
    this.extra = el("div", "extra");
    this.node.append(head, this.stepList, this.text, this.files, this.extra);
    this.setState("submitted");
  }

  setState(value) {
    this.state = value;
    this.node.dataset.state = value;
    this.badge.textContent = { submitted: "working", "input-required": "needs your answer" }[value] || value;
    this.node.setAttribute("aria-busy", String(!TERMINAL.has(value) && value !== "input-required" && value !== "answered"));
  }

  add(item) {
    if (!item || typeof item !== "object") return;
    if (item.kind === "task") {
      // A snapshot (a stream's first item, a resubscription's, a final Task): its status message
      // repeats the last event, so only a finished task's answer or question is taken from it.
      this.taskId = item.id;
      const status = item.status || {};
      const message = status.message;
      if (message && status.state === "input-required") this.approvals = approvalsOf(message);
      if (message && status.state !== "input-required") this.usage = message.metadata?.llm || this.usage;
      if (message && !message.metadata?.llmEvent) {
        if (status.state === "input-required") this.question = textOf(message);
        else if (TERMINAL.has(status.state) && status.state !== "canceled") this.finalText = textOf(message) || this.finalText;
      }
      if (status.state) this.setState(status.state);
      for (const artifact of item.artifacts || []) this.artifact(artifact); // the whole of each: replaces
      this.draw();
      return;
    }
    if (item.taskId) this.taskId = item.taskId;
    if (item.kind === "status-update") this.status(item.status || {}, item.final === true);
    else if (item.kind === "artifact-update") this.artifact(item.artifact || {}, item.append === true);
    else if (item.kind === "message") {
      this.finalText = textOf(item);
      this.setState("completed");
      this.draw();
    }
  }

  status(status, final) {
    const message = status.message;
    const meta = message?.metadata || {};
    const stateName = status.state || this.state;
    if (message && meta.llmEvent === "text") {
      this.streamed += textOf(message);
      this.setState(stateName);
      this.draw();
      return;
    }
    const data = (message?.parts || []).filter((p) => p.kind === "data").map((p) => [p.data || {}, p.metadata || {}]);
    const tools = data.filter(([d]) => d.type === "tool_call" || d.type === "tool_result");
    if (tools.length) {
      for (const [d, m] of tools) this.tool(d, m.tool_call_id || d.function_name);
    } else if (message && meta.workflowNode && stateName === "working") {
      const step = this.step(`node:${meta.workflowNode}`, `Workflow node ${meta.workflowNode}`);
      this.stepState(step, meta.workflowNodeState || "working");
      if (textOf(message)) step.body.append(el("div", "step-line", textOf(message)));
    } else if (message && meta.forwardedFrom && stateName === "working") {
      const step = this.step(`peer:${meta.forwardedFrom}`, `Delegated to ${meta.forwardedFrom}`);
      this.stepState(step, "working");
      if (textOf(message)) step.body.append(el("div", "step-line", textOf(message)));
    } else if (message && stateName === "working" && textOf(message)) {
      const step = this.step("progress", "Progress");
      this.stepState(step, "working");
      step.body.append(el("div", "step-line", textOf(message)));
      step.summaryText.textContent = `Progress: ${textOf(message).slice(0, 80)}`;
    } else if (message && stateName === "input-required") {
      this.question = textOf(message);
      this.approvals = approvalsOf(message);
    } else if (message && stateName !== "working" && stateName !== "canceled") {
      this.finalText = textOf(message) || this.finalText;
      this.usage = meta.llm || this.usage;
    }
    this.setState(stateName);
    if (TERMINAL.has(stateName) || stateName === "input-required") {
      for (const step of this.steps.values()) if (step.state === "working") this.stepState(step, stateName === "completed" ? "completed" : stateName);
    }
    this.draw();
  }

  step(key, title) {
    let step = this.steps.get(key);
    if (!step) {
      const details = el("details", "step");
      const summary = el("summary");
      const summaryText = el("span", "step-title", title);
      const stateNode = el("span", "step-state");
      summary.append(summaryText, stateNode);
      const body = el("div", "step-body");
      details.append(summary, body);
      details.dataset.step = key;
      step = { details, summaryText, stateNode, body, state: "working" };
      this.steps.set(key, step);
      this.stepList.append(details);
    }
    return step;
  }

  stepState(step, value) {
    step.state = value;
    step.details.dataset.state = value;
    step.stateNode.textContent = value;
  }

  tool(data, id) {
    const name = data.function_name || "tool";
    const step = this.step(`tool:${id}`, `Tool ${name}`);
    step.details.dataset.tool = name;
    if (data.type === "tool_call") {
      this.stepState(step, "working");
      step.body.append(el("div", "step-label", "Arguments"), el("pre", "step-json", pretty(data.arguments ?? {})));
    } else {
      this.stepState(step, data.is_error ? "failed" : "completed");
      step.body.append(el("div", "step-label", "Result"), el("pre", "step-json", pretty(data.result ?? null)));
    }
  }

  // An artifact by its id: a chunk with `append` adds its parts to what came, anything else
  // (a first chunk, a final Task's whole artifact) replaces them; it is drawn in one place.
  artifact(artifact, append = false) {
    const id = artifact.artifactId || artifact.name || `artifact-${this.artifacts.size}`;
    let shown = this.artifacts.get(id);
    if (!shown) {
      shown = { parts: [], box: el("div", "artifact-group") };
      shown.box.dataset.artifact = id;
      this.artifacts.set(id, shown);
      this.files.append(shown.box);
    }
    const parts = Array.isArray(artifact.parts) ? artifact.parts : [];
    shown.parts = append ? [...shown.parts, ...parts] : [...parts];
    shown.box.replaceChildren(...this.drawParts(shown.parts, artifact.name));
  }

  // The parts of one artifact: its text parts joined into one block, each file and data apart.
  drawParts(parts, artifactName) {
    const nodes = [];
    let text = null;
    for (const part of parts) {
      if (part.kind === "text") {
        if (text === null) {
          text = { value: "", box: el("div", "artifact text-artifact") };
          nodes.push(text.box);
        }
        text.value += part.text ?? "";
        continue;
      }
      if (text !== null) text.box.append(renderMarkdown(text.value));
      text = null;
      if (part.kind === "file" && part.file?.uri) nodes.push(this.fileBox(part.file, artifactName));
      else if (part.kind === "data") nodes.push(el("pre", "artifact step-json", pretty(part.data)));
    }
    if (text !== null) text.box.append(renderMarkdown(text.value));
    return nodes;
  }

  fileBox(file, artifactName) {
    if (!safeUrl(file.uri)) { // an agent's javascript: or data: URI is shown, never opened
      return el("div", "artifact", `${file.name || "file"}: ${file.uri.slice(0, 200)}`);
    }
    const name = file.name || artifactName || "file";
    const box = el("div", "artifact");
    if ((file.mimeType || "").startsWith("image/") && file.uri.startsWith("/")) { // our own downloads only
      const img = el("img", "artifact-image");
      img.src = file.uri;
      img.alt = name;
      img.loading = "lazy";
      box.append(img);
    }
    const a = link(file.uri, `Download ${name}`);
    a.target = "_self";
    a.setAttribute("download", name);
    a.className = "download";
    box.append(a);
    return box;
  }

  draw() {
    const text = this.finalText ?? this.streamed;
    this.text.replaceChildren(renderMarkdown(text));
    if (this.state === "canceled") this.text.append(el("p", "muted", "Canceled."));
    this.extra.replaceChildren();
    if (this.question && (this.state === "input-required" || this.state === "answered")) {
      const question = el("div", "question");
      question.append(renderMarkdown(this.question));
      this.extra.append(question);
    }
    const asking = this.state === "input-required" && this.taskId;
    if (this.approvals?.length && (asking || this.state === "answered")) {
      this.extra.append(approvalBox(this, asking));
    } else if (asking) this.extra.append(answerForm(this));
    if (this.usage) this.extra.append(el("p", "usage muted", usageText(this.usage)));
    drawTotal();
  }

  fail(message) {
    this.setState("failed");
    this.extra.replaceChildren(el("p", "error", message));
  }
}

// The tool calls an LLM agent waits to have approved: {"type": "tool_approval", ...} data parts.
function approvalsOf(message) {
  return (message?.parts || []).filter((p) => p.kind === "data" && p.data?.type === "tool_approval").map((p) => p.data);
}

function approvalBox(answer, asking) {
  const box = el("div", "approvals");
  for (const call of answer.approvals) {
    const item = el("div", "approval");
    item.dataset.tool = call.function_name || "tool";
    item.append(el("div", "approval-title", `Run ${call.function_name || "a tool"}?`));
    item.append(el("pre", "step-json", pretty(call.arguments ?? {})));
    if (asking) {
      const buttons = el("div", "approval-buttons");
      const yes = el("button", "primary approve", "Approve");
      const no = el("button", "danger deny", "Deny");
      yes.type = no.type = "button";
      yes.addEventListener("click", () => approve(answer, call, true));
      no.addEventListener("click", () => approve(answer, call, false));
      buttons.append(yes, no);
      item.append(buttons);
    }
    box.append(item);
  }
  return box;
}

// One call's answer: the agent goes on, or asks again for the calls still waiting.
function approve(answer, call, approved) {
  const result = { tool_call_id: call.tool_call_id, approved };
  if (!approved) result.reason = "denied in the chat";
  const text = `${approved ? "Approved" : "Denied"} ${call.function_name || "the tool call"}`;
  send(text, answer.taskId, [result]);
}

function usageText(usage) {
  const tokens = (usage.inputTokens || 0) + (usage.outputTokens || 0);
  const cost = typeof usage.costUsd === "number" ? ` · $${usage.costUsd.toFixed(4)}` : "";
  return `${tokens} tokens (${usage.inputTokens || 0} in, ${usage.outputTokens || 0} out)${cost}`;
}

// The conversation's tokens and cost: the sum of its answers'.
function drawTotal() {
  const total = $("usage-total");
  if (!total) return;
  const used = state.answers.map((a) => a.usage).filter(Boolean);
  if (!used.length) {
    total.textContent = "";
    return;
  }
  const sum = { inputTokens: 0, outputTokens: 0 };
  let cost = null;
  for (const u of used) {
    sum.inputTokens += u.inputTokens || 0;
    sum.outputTokens += u.outputTokens || 0;
    if (typeof u.costUsd === "number") cost = (cost || 0) + u.costUsd;
  }
  if (cost !== null) sum.costUsd = cost;
  total.textContent = `This conversation: ${usageText(sum)}`;
}

function answerForm(answer) {
  const form = el("form", "answer-form");
  const id = `answer-${answer.seq}`;
  const label = el("label", "sr", "Your answer");
  label.htmlFor = id;
  const input = el("input");
  input.id = id;
  input.autocomplete = "off";
  input.placeholder = "Your answer";
  const button = el("button", "primary", "Answer");
  button.type = "submit";
  form.append(label, input, button);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (input.value.trim()) send(input.value, answer.taskId);
  });
  queueMicrotask(() => input.focus());
  return form;
}

function userTurn(text, files) {
  const node = el("li", "turn user");
  const head = el("div", "turn-head");
  head.append(el("span", "who-label", "You"));
  const body = el("div", "text");
  body.append(renderMarkdown(text));
  node.append(head, body);
  if (files?.length) {
    const list = el("div", "artifacts");
    for (const file of files) {
      const a = link(file.url, `Attached: ${file.name}`);
      a.target = "_self";
      a.className = "download";
      list.append(a);
    }
    node.append(list);
  }
  $("turns").append(node);
  return node;
}

function scrollDown() {
  const turns = $("turns");
  turns.scrollTop = turns.scrollHeight;
}

// ---------------------------------------------------------------- conversations

async function loadAgents() {
  const select = $("agent");
  const response = await api(`${ROOT}/a2a/agents`);
  const agents = response.ok ? (await response.json()).agents : [];
  const wanted = select.value || document.body.dataset.defaultAgent;
  select.replaceChildren(...agents.map((a) => {
    const option = el("option", null, a.name);
    option.value = a.name;
    option.title = a.description || "";
    return option;
  }));
  if (agents.some((a) => a.name === wanted)) select.value = wanted;
  if (!agents.length) setStatus("No agents on the mesh yet.");
}

async function loadConversations() {
  const response = await api(API);
  if (!response.ok) return setStatus(await problem(response));
  state.conversations = (await response.json()).conversations;
  drawSidebar();
}

function drawSidebar() {
  const list = $("conversations");
  list.replaceChildren(...state.conversations.map((c) => {
    const li = el("li");
    const button = el("button", "conversation", c.title || "(untitled)");
    button.type = "button";
    button.dataset.id = c.id;
    button.title = `${c.title || "(untitled)"} · ${c.agent}`;
    if (state.current?.id === c.id) button.setAttribute("aria-current", "true");
    button.addEventListener("click", () => openConversation(c.id));
    li.append(button);
    return li;
  }));
  if (!state.conversations.length) list.append(el("li", "empty", "No conversations yet."));
}

function newConversation() {
  stopReading();
  state.current = null;
  state.answers = [];
  $("turns").replaceChildren();
  $("agent").disabled = false;
  history.replaceState(null, "", location.pathname);
  drawSidebar();
  setStatus("");
  closeSidebar();
  $("composer-text").focus();
}

async function openConversation(id) {
  stopReading();
  const response = await api(`${API}/${encodeURIComponent(id)}`);
  if (!response.ok) {
    setStatus(await problem(response));
    return;
  }
  const conversation = await response.json();
  state.current = conversation;
  history.replaceState(null, "", `#${conversation.id}`);
  $("agent").value = conversation.agent;
  $("agent").disabled = true;
  $("turns").replaceChildren();
  state.answers = [];
  let last = null;
  for (const turn of conversation.turns) {
    if (turn.role === "user") userTurn(turn.text, turn.files);
    else {
      const answer = new Answer(turn.seq);
      for (const earlier of state.answers) if (earlier.taskId === turn.taskId) earlier.answered = true;
      state.answers.push(answer);
      $("turns").append(answer.node);
      for (const item of turn.events || []) answer.add(item);
      if (turn.taskId) answer.taskId = turn.taskId;
      if (turn.state) answer.setState(turn.state);
      if (turn.error) answer.fail(turn.error);
      last = { answer, turn };
    }
  }
  for (const answer of state.answers) {
    if (answer.answered && answer.state === "input-required") answer.setState("answered");
    answer.draw();
  }
  drawSidebar();
  closeSidebar();
  scrollDown();
  if (last && last.turn.taskId && !TERMINAL.has(last.turn.state) && last.turn.state !== "input-required") {
    resume(last.answer);
  }
}

async function ensureConversation() {
  if (state.current) return state.current;
  const agent = $("agent").value;
  const response = await api(API, { method: "POST", body: JSON.stringify({ agent }) });
  if (!response.ok) throw new Error(await problem(response));
  state.current = await response.json();
  $("agent").disabled = true;
  history.replaceState(null, "", `#${state.current.id}`);
  return state.current;
}

// ---------------------------------------------------------------- sending, streaming, canceling

function setStatus(text) {
  $("status").textContent = text;
}

function setRunning(running) {
  state.running = running;
  $("send").hidden = !!running;
  $("stop").hidden = !running;
}

function stopReading() {
  state.running?.controller.abort();
  setRunning(null);
}

async function stream(answer, path, body) {
  const controller = new AbortController();
  setRunning({ answer, controller });
  try {
    const response = await api(path, { method: "POST", body: JSON.stringify(body), signal: controller.signal });
    if (!response.ok) {
      answer.fail(await problem(response));
      return;
    }
    await readEvents(response, (name, data) => {
      if (name === "item") answer.add(data);
      else if (name === "error") answer.fail(data.message);
      // The turn is over at its last item: the next message may go while the stream closes.
      const over = TERMINAL.has(answer.state) || answer.state === "input-required";
      if (over && state.running?.answer === answer) setRunning(null);
      scrollDown();
    });
  } catch (error) {
    if (error.name !== "AbortError") answer.fail(`The connection to the gateway was lost: ${error.message}`);
  } finally {
    if (state.running?.answer === answer) setRunning(null);
    loadConversations();
  }
}

async function send(text, taskId = null, approvals = null) {
  if (state.running) return;
  const files = approvals ? [] : state.files;
  if (!text.trim() && !files.length) return;
  let conversation;
  try {
    conversation = await ensureConversation();
  } catch (error) {
    setStatus(error.message);
    return;
  }
  setStatus("");
  if (!approvals) {
    $("composer-text").value = "";
    state.files = [];
    drawAttachments();
  }
  const shown = files.map((f) => ({ name: f.name, url: "#" }));
  userTurn(text, shown);
  if (taskId) {
    for (const earlier of state.answers) {
      if (earlier.taskId === taskId && earlier.state === "input-required") {
        earlier.setState("answered");
        earlier.draw();
      }
    }
  }
  const count = $("turns").querySelectorAll(".turn").length;
  const answer = new Answer(count);
  state.answers.push(answer);
  $("turns").append(answer.node);
  scrollDown();
  const body = { text, files };
  if (taskId) body.taskId = taskId;
  if (approvals) body.approvals = approvals;
  await stream(answer, `${API}/${encodeURIComponent(conversation.id)}/messages`, body);
  if (files.length) openConversation(conversation.id); // the stored files' links
}

function resume(answer) {
  stream(answer, `${API}/${encodeURIComponent(state.current.id)}/resume`, { seq: answer.seq });
}

async function cancel() {
  const running = state.running;
  if (!running || !state.current) return;
  if (!running.answer.taskId) {
    running.controller.abort();
    running.answer.setState("canceled");
    running.answer.draw();
    return;
  }
  setStatus("Canceling…");
  const response = await api(`${API}/${encodeURIComponent(state.current.id)}/cancel`, {
    method: "POST",
    body: JSON.stringify({ taskId: running.answer.taskId }),
  });
  setStatus(response.ok ? "" : await problem(response));
}

// ---------------------------------------------------------------- files

function drawAttachments() {
  const box = $("attachments");
  box.replaceChildren(...state.files.map((file, index) => {
    const chip = el("span", "chip", file.name);
    const remove = el("button", "chip-remove", "×");
    remove.type = "button";
    remove.setAttribute("aria-label", `Remove ${file.name}`);
    remove.addEventListener("click", () => { state.files.splice(index, 1); drawAttachments(); });
    chip.append(remove);
    return chip;
  }));
}

async function addFiles(list) {
  for (const file of list) {
    if (file.size > MAX_FILE_BYTES) {
      setStatus(`${file.name} is larger than ${Math.round(MAX_FILE_BYTES / 1000)} kB, the most the chat sends.`);
      continue;
    }
    const bytes = await new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(String(reader.result).split(",", 2)[1] || "");
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(file);
    });
    state.files.push({ name: file.name, mimeType: file.type || "application/octet-stream", bytes });
  }
  drawAttachments();
}

// ---------------------------------------------------------------- layout

function closeSidebar() {
  document.body.classList.remove("sidebar-open");
  $("menu").setAttribute("aria-expanded", "false");
}

$("menu").addEventListener("click", () => {
  const open = document.body.classList.toggle("sidebar-open");
  $("menu").setAttribute("aria-expanded", String(open));
});

// ---------------------------------------------------------------- wiring

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  // A question waiting for its answer is answered from the main box too.
  const waiting = state.answers.at(-1);
  send($("composer-text").value, waiting?.state === "input-required" ? waiting.taskId : null);
});
$("composer-text").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    $("composer").requestSubmit();
  }
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && state.running) {
    event.preventDefault();
    cancel();
  }
});
$("stop").addEventListener("click", cancel);
$("new-chat").addEventListener("click", newConversation);
$("file").addEventListener("change", (event) => { addFiles(event.target.files); event.target.value = ""; });
for (const name of ["dragenter", "dragover"]) {
  document.addEventListener(name, (event) => { event.preventDefault(); document.body.classList.add("dragging"); });
}
document.addEventListener("dragleave", (event) => {
  if (!event.relatedTarget) document.body.classList.remove("dragging");
});
document.addEventListener("drop", (event) => {
  event.preventDefault();
  document.body.classList.remove("dragging");
  if (event.dataTransfer?.files?.length) addFiles(event.dataTransfer.files);
});

await loadAgents();
await loadConversations();
const wanted = location.hash.slice(1);
if (wanted && state.conversations.some((c) => c.id === wanted)) await openConversation(wanted);
document.body.dataset.ready = "true";
