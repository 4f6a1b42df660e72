#!/usr/bin/env node
// An A2E worker in JavaScript (Node, no packages): one JSON object per line on stdin/stdout.
// Skills: `shout` answers the text in capitals (SHOUT_LEVEL exclamation marks added);
// `spell` streams one progress event per letter and the letters as an artifact.
"use strict";
const readline = require("readline");
const crypto = require("crypto");

const LEVEL = Number(process.env.SHOUT_LEVEL || "1");
const started = Date.now();
const SKILLS = [
  { name: "shout", description: "Answers the text in capitals", triggers: ["shout hello"], tags: ["text"] },
  {
    name: "spell",
    description: "Spells a word letter by letter, streaming progress and an artifact",
    argument_hint: "a word",
    tags: ["text", "streaming"],
  },
];

function send(type, fields) {
  const message = { type, id: crypto.randomUUID().replace(/-/g, ""), version: "1.0", ts: Date.now() / 1000, ...fields };
  process.stdout.write(JSON.stringify(message) + "\n");
}

function answer(request, data) {
  send("skill/call/resp", { req_id: request.id, name: request.name, data: { success: true, duration_ms: 0, ...data } });
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function call(request) {
  const text = String((request.arguments || {}).text || "");
  if (request.name === "shout") {
    answer(request, { summary: text.toUpperCase() + "!".repeat(LEVEL) });
  } else if (request.name === "spell") {
    const word = text.trim();
    if (!word) {
      const data = { success: false, duration_ms: 0, error: "spell needs a word", error_code: "skill_error" };
      send("skill/call/resp", { req_id: request.id, name: request.name, data });
      return;
    }
    let seq = 0;
    for (const [i, letter] of [...word].entries()) {
      const pct = Math.round((100 * (i + 1)) / word.length);
      send("skill/event", { req_id: request.id, kind: "progress", seq: seq++, data: { pct, message: letter } });
      const chunk = Buffer.from(letter).toString("base64");
      const data = { name: "letters", mime: "text/plain", chunk, final: i === word.length - 1 };
      send("skill/event", { req_id: request.id, kind: "artifact", seq: seq++, data });
      await sleep(5);
    }
    answer(request, { summary: `${word} has ${word.length} letters`, data: { letters: [...word] } });
  } else {
    send("error", { req_id: request.id, code: "unknown_skill", message: `no skill ${request.name}` });
  }
}

const input = readline.createInterface({ input: process.stdin });
input.on("line", (line) => {
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return;
  }
  switch (message.type) {
    case "handshake/req":
      send("handshake/resp", { req_id: message.id, session_id: crypto.randomUUID(), max_parallel: 8, ok: true });
      break;
    case "skill/discover/req":
      send("skill/discover/resp", { req_id: message.id, skills: SKILLS });
      break;
    case "skill/call/req":
      call(message);
      break;
    case "ping":
      send("pong", { req_id: message.id, uptime_seconds: (Date.now() - started) / 1000 });
      break;
    case "shutdown":
      input.close();
      break;
    default:
      if (message.id) send("error", { req_id: message.id, code: "invalid_message", message: `unknown type ${message.type}` });
  }
});
input.on("close", () => process.exit(0));
