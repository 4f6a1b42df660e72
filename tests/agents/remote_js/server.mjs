// A remote A2A agent for the proxy's tests, built with @a2a-js/sdk on Express.
// JSON-RPC at /, HTTP+JSON at /rest, the card at /.well-known/agent-card.json.
// "ask": input-required, then "weather in <answer>: sunny"; "slow": works until canceled;
// "steps": three status updates then done; anything else: "echo: <text>".
//   node server.mjs PORT      # prints "ready" once it listens
import express from 'express';
import { DefaultRequestHandler, InMemoryTaskStore } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, restHandler, UserBuilder } from '@a2a-js/sdk/server/express';
import { Role, TaskState } from '@a2a-js/sdk';
import { randomUUID } from 'node:crypto';

const port = Number(process.argv[2]);
const base = `http://127.0.0.1:${port}`;
const { TASK_STATE_SUBMITTED: SUBMITTED, TASK_STATE_WORKING: WORKING, TASK_STATE_COMPLETED: COMPLETED } = TaskState;
const { TASK_STATE_CANCELED: CANCELED, TASK_STATE_INPUT_REQUIRED: INPUT_REQUIRED } = TaskState;
const AGENT = Role.ROLE_AGENT;

const text = (message) => message.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
const agentMessage = (ctx, value) => ({
  messageId: randomUUID(), contextId: ctx.contextId, taskId: ctx.taskId, role: AGENT,
  parts: [{ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: '' }],
  metadata: undefined, extensions: [], referenceTaskIds: [],
});
const status = (ctx, state, value) => ({
  kind: 'statusUpdate',
  data: {
    taskId: ctx.taskId, contextId: ctx.contextId, metadata: undefined,
    status: { state, message: value === undefined ? undefined : agentMessage(ctx, value), timestamp: new Date().toISOString() },
  },
});

class Weather {
  constructor() { this.canceled = new Set(); }

  async execute(ctx, bus) {
    const said = text(ctx.userMessage).trim();
    const task = ctx.task ?? {
      id: ctx.taskId, contextId: ctx.contextId, artifacts: [], history: [ctx.userMessage], metadata: undefined,
      status: { state: SUBMITTED, message: undefined, timestamp: new Date().toISOString() },
    };
    bus.publish({ kind: 'task', data: task });
    if (ctx.task?.status?.state === INPUT_REQUIRED) {
      bus.publish(status(ctx, COMPLETED, `weather in ${said}: sunny`));
    } else if (said === 'ask') {
      bus.publish(status(ctx, INPUT_REQUIRED, 'Which city?'));
    } else if (said === 'slow') {
      bus.publish(status(ctx, WORKING));
      while (!this.canceled.has(ctx.taskId)) await new Promise((r) => setTimeout(r, 20));
      bus.publish(status(ctx, CANCELED, 'canceled'));
    } else if (said === 'steps') {
      for (const step of ['one', 'two', 'three']) bus.publish(status(ctx, WORKING, step));
      bus.publish(status(ctx, COMPLETED, 'done'));
    } else {
      bus.publish(status(ctx, COMPLETED, `echo: ${said}`));
    }
    bus.finished();
  }

  async cancelTask(taskId) { this.canceled.add(taskId); }
}

const card = {
  name: 'js-weather', description: 'Tells the weather, in JavaScript', version: '0.9.0',
  supportedInterfaces: [
    { url: `${base}/`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' },
    { url: `${base}/rest`, protocolBinding: 'HTTP+JSON', tenant: '', protocolVersion: '1.0' },
  ],
  provider: undefined, documentationUrl: undefined, iconUrl: undefined,
  capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
  securitySchemes: {}, securityRequirements: [], defaultInputModes: ['text/plain'], defaultOutputModes: ['text/plain'],
  skills: [{ id: 'weather', name: 'Weather', description: 'The weather in a city', tags: ['weather'], examples: [],
    inputModes: [], outputModes: [], securityRequirements: [] }],
  signatures: [],
};

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new Weather());
const app = express();
app.use('/.well-known/agent-card.json', agentCardHandler({ agentCardProvider: handler }));
app.use('/rest', restHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
app.use('/', jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
app.listen(port, '127.0.0.1', () => console.log('ready'));
