#!/usr/bin/env node
// Soak and chaos test of `tandem serve` (docs/testing.md, "Soak"): starts the real server on the
// built-in default model (CPU, --port 0), then sends N requests over every API from C concurrent
// clients with bad inputs, client disconnects, slow readers and senders and a few very large
// requests interleaved, while /health is polled. It checks that every good request got a valid
// response, every bad one a 4xx JSON error, the server stayed healthy, and at the end that no
// request is running, no KV page is held by a request, and resident memory, open fds and threads
// are back at their post-warmup baseline. Prints a summary table; exits 1 on any failure.
//
// Usage (from the repository root):
//   node tests/soak/soak.mjs [--bin build/tandem] [--requests 10000] [--concurrency 24]
//        [--large K] [--max-seconds 3600] [--seed 1] [--speculative] [--server-arg ARG]...
// Local only: the server listens on 127.0.0.1 and nothing else is contacted.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

// --- options ----------------------------------------------------------------------------------
const opt = {
  bin: 'build/tandem', requests: 10000, concurrency: 24, large: -1, maxSeconds: 3600, seed: 1,
  speculative: false, serverArgs: [], rssTolerance: 0.10,
};
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i], v = () => process.argv[++i];
  if (a === '--bin') opt.bin = v();
  else if (a === '--requests') opt.requests = Number(v());
  else if (a === '--concurrency') opt.concurrency = Number(v());
  else if (a === '--large') opt.large = Number(v());
  else if (a === '--max-seconds') opt.maxSeconds = Number(v());
  else if (a === '--seed') opt.seed = Number(v());
  else if (a === '--speculative') opt.speculative = true;
  else if (a === '--server-arg') opt.serverArgs.push(v());
  else {
    console.error(`unknown option ${a}\n` +
      'usage: node tests/soak/soak.mjs [--bin build/tandem] [--requests N] [--concurrency C] ' +
      '[--large K] [--max-seconds S] [--seed S] [--speculative] [--server-arg ARG]...');
    process.exit(2);
  }
}
// One very large request per 1,000 (at least 2): they are what made memory ratchet up.
if (opt.large < 0) opt.large = Math.max(2, Math.round(opt.requests / 1000));
const binPath = path.resolve(opt.bin);
if (!fs.existsSync(binPath)) {
  console.error(`tandem binary not found: ${binPath}`);
  process.exit(2);
}

// --- small helpers ----------------------------------------------------------------------------
function mulberry32(a) {
  return () => {
    a |= 0; a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rng = mulberry32(opt.seed);
const rint = (lo, hi) => lo + Math.floor(rng() * (hi - lo + 1));
const pick = (xs) => xs[Math.floor(rng() * xs.length)];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now();
class Check extends Error {}
function check(cond, what) {
  if (!cond) throw new Check(what);
}
const short = (s, n = 200) => (s.length > n ? `${s.slice(0, n)}...` : s);

// --- the server -------------------------------------------------------------------------------
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'tandem-soak-'));
const logPath = path.join(work, 'server.log');
const serverArgs = ['serve', '--host', '127.0.0.1', '--port', '0', '--tool-call-parser', 'glm47'];
if (opt.speculative)
  serverArgs.push('--speculative-algorithm', 'EAGLE', '--speculative-num-steps', '3',
                  '--speculative-eagle-topk', '1', '--speculative-num-draft-tokens', '4');
serverArgs.push(...opt.serverArgs);
const logFd = fs.openSync(logPath, 'w');
const server = spawn(binPath, serverArgs, { stdio: ['ignore', logFd, logFd] });
let serverExit = null;
server.on('exit', (code, sig) => { serverExit = { code, sig }; });
const pid = server.pid;
const readLog = () => fs.readFileSync(logPath, 'utf8');
function die(msg) {
  console.log(`FAIL ${msg}`);
  console.log(`--- server log (tail) ${logPath}\n${readLog().split('\n').slice(-40).join('\n')}`);
  if (serverExit === null) server.kill('SIGKILL');
  process.exit(1);
}

let port = 0;
for (let i = 0; i < 600 && !port; i++) {
  const m = readLog().match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
  if (m) port = Number(m[1]);
  else if (serverExit) die(`server exited at start-up (${JSON.stringify(serverExit)})`);
  else await sleep(100);
}
if (!port) die('server did not print its port');

const agent = new http.Agent({ keepAlive: true, maxSockets: opt.concurrency + 8 });

// request(): one HTTP exchange. body: string or Buffer (sent with Content-Type: application/json
// unless contentType is given, null for none). onResponse(res, req) may take over the response
// (streams); otherwise the whole body is collected. Resolves {status, headers, text, ms}.
function request(method, p, { body, contentType = 'application/json', timeoutMs = 180_000,
                              onResponse, agentFor = agent, writeBody } = {}) {
  const t0 = now();
  return new Promise((resolve, reject) => {
    const headers = {};
    if (body !== undefined && contentType) headers['Content-Type'] = contentType;
    if (body !== undefined) headers['Content-Length'] = Buffer.byteLength(body);
    const req = http.request({ host: '127.0.0.1', port, method, path: p, headers, agent: agentFor });
    const timer = setTimeout(() => {
      req.destroy(new Error(`timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('error', (e) => { clearTimeout(timer); reject(e); });
    req.on('response', (res) => {
      if (onResponse) {
        onResponse(res, req).then((v) => { clearTimeout(timer); resolve({ ...v, ms: now() - t0 }); },
                                  (e) => { clearTimeout(timer); req.destroy(); reject(e); });
        return;
      }
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('error', (e) => { clearTimeout(timer); reject(e); });
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode, headers: res.headers,
                  text: Buffer.concat(parts).toString('utf8'), ms: now() - t0 });
      });
    });
    if (writeBody) writeBody(req);
    else req.end(body);
  });
}
const post = (p, obj, o = {}) => request('POST', p, { body: typeof obj === 'string' ? obj : JSON.stringify(obj), ...o });
function json(r, what) {
  try {
    return JSON.parse(r.text);
  } catch {
    throw new Check(`${what}: HTTP ${r.status}, body is not JSON: ${short(r.text)}`);
  }
}
function ok200(r, what) {
  check(r.status === 200, `${what}: HTTP ${r.status}: ${short(r.text)}`);
  return json(r, what);
}

// Splits an SSE body into its data payloads; checks it ends with exactly one [DONE] and carries
// no error event.
function sseEvents(text, what) {
  check(text.endsWith('data: [DONE]\n\n'), `${what}: stream does not end with [DONE]: ${short(text.slice(-200))}`);
  const blocks = text.split('\n\n').filter((b) => b.length > 0);
  const data = blocks.filter((b) => b.startsWith('data: ')).map((b) => b.slice(6));
  check(data.filter((d) => d === '[DONE]').length === 1, `${what}: [DONE] more than once`);
  const events = data.slice(0, -1).map((d) => {
    try {
      return JSON.parse(d);
    } catch {
      throw new Check(`${what}: event is not JSON: ${short(d)}`);
    }
  });
  for (const e of events) check(!e.error, `${what}: error event ${short(JSON.stringify(e))}`);
  return events;
}

// --- /proc ------------------------------------------------------------------------------------
function procStatus() {
  const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (k) => Number(s.match(new RegExp(`^${k}:\\s+(\\d+)`, 'm'))[1]);
  return { rssMiB: field('VmRSS') / 1024, threads: field('Threads'),
           fds: fs.readdirSync(`/proc/${pid}/fd`).length };
}
// The lowest of a few samples: a request finishing or the trimmer reading /proc/self/statm can
// hold an fd or a page for a moment.
async function settledStatus(samples = 6, gapMs = 500) {
  let best = procStatus();
  for (let i = 1; i < samples; i++) {
    await sleep(gapMs);
    const s = procStatus();
    best = { rssMiB: Math.min(best.rssMiB, s.rssMiB), threads: Math.min(best.threads, s.threads),
             fds: Math.min(best.fds, s.fds) };
  }
  return best;
}
async function serverInfo() {
  const r = await request('GET', '/get_server_info', { agentFor: healthAgent, timeoutMs: 10_000 });
  return ok200(r, '/get_server_info').internal_states[0];
}

// --- inputs -----------------------------------------------------------------------------------
const prompts = [
  'It is a truth universally acknowledged', 'Elizabeth walked to Netherfield', 'Mr. Darcy said',
  'The weather at Bath was', 'Emma could not help', 'Her sister replied, with a smile,',
  'Once upon a time', 'In the morning', '"My dear Mr. Bennet," said his lady',
  'Captain Wentworth had', 'Anne Elliot', 'The ball at Meryton',
];
const words = 'the a of and to in was her his she he that it with for said could would very much'.split(' ');
const userMessages = ['Hello', 'Tell me about Bath.', 'Who is Mr. Darcy?', 'Write one sentence.',
                      'What is the weather like?', 'Describe a ball.'];
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 },
                                                 days: { type: 'integer' } },
                  required: ['city'] } } },
  { type: 'function', function: { name: 'send_letter', description: 'Send a letter',
    parameters: { type: 'object', properties: { to: { type: 'string', enum: ['Jane', 'Emma'] } },
                  required: ['to'] } } },
];
const sampling = () => pick([{ temperature: 0 }, { temperature: 0.7, top_p: 0.9 }, { temperature: 1, seed: rint(0, 1e6) }]);
function chatMessages() {
  const n = rint(1, 3), m = [];
  if (rng() < 0.3) m.push({ role: 'system', content: 'You are a novelist.' });
  for (let i = 0; i < n; i++) {
    m.push({ role: 'user', content: pick(userMessages) });
    if (i + 1 < n) m.push({ role: 'assistant', content: pick(prompts) });
  }
  return m;
}

// --- validators -------------------------------------------------------------------------------
const finishes = ['stop', 'length'];
function checkCompletion(j, n, maxTokens, what) {
  check(j.object === 'text_completion', `${what}: object ${j.object}`);
  check(j.choices?.length === n, `${what}: ${j.choices?.length} choices, expected ${n}`);
  for (const c of j.choices) {
    check(typeof c.text === 'string', `${what}: text not a string`);
    check(finishes.includes(c.finish_reason), `${what}: finish_reason ${c.finish_reason}`);
  }
  check(j.usage && j.usage.completion_tokens <= maxTokens * n && j.usage.prompt_tokens > 0,
        `${what}: usage ${JSON.stringify(j.usage)}`);
}
function checkStreamChoices(events, n, object, what) {
  const done = new Set();
  for (const e of events) {
    check(e.object === object, `${what}: chunk object ${e.object}`);
    for (const c of e.choices) {
      check(!done.has(c.index), `${what}: a chunk after choice ${c.index} finished`);
      if (c.finish_reason) {
        check(finishes.includes(c.finish_reason) || c.finish_reason === 'tool_calls',
              `${what}: finish_reason ${c.finish_reason}`);
        done.add(c.index);
      }
    }
  }
  check(done.size === n, `${what}: ${done.size} of ${n} choices finished`);
}
function checkChat(j, what) {
  check(j.object === 'chat.completion', `${what}: object ${j.object}`);
  const c = j.choices?.[0];
  check(c && c.message?.role === 'assistant', `${what}: no assistant message`);
  check(typeof c.message.content === 'string' || (c.message.content === null && c.message.tool_calls),
        `${what}: content ${JSON.stringify(c.message.content)}`);
  check([...finishes, 'tool_calls'].includes(c.finish_reason), `${what}: finish_reason ${c.finish_reason}`);
  return c;
}
function checkToolCalls(calls, what) {
  check(Array.isArray(calls) && calls.length > 0, `${what}: no tool_calls`);
  for (const t of calls) {
    check(tools.some((x) => x.function.name === t.function?.name), `${what}: call of ${t.function?.name}`);
    let args;
    try {
      args = JSON.parse(t.function.arguments);
    } catch {
      throw new Check(`${what}: arguments not JSON: ${short(t.function.arguments)}`);
    }
    check(args && typeof args === 'object' && !Array.isArray(args), `${what}: arguments not an object`);
  }
}
function checkGenerate(j, what) {
  check(typeof j.text === 'string' && Array.isArray(j.output_ids), `${what}: ${short(JSON.stringify(j))}`);
  check(j.meta_info?.finish_reason?.type === 'stop' || j.meta_info?.finish_reason?.type === 'length',
        `${what}: finish_reason ${JSON.stringify(j.meta_info?.finish_reason)}`);
}

// --- good requests ----------------------------------------------------------------------------
// Each returns normally when the response is valid and throws Check otherwise.
const good = {
  async completion() {
    const n = rng() < 0.15 ? 2 : 1, max = rint(1, 24);
    const body = { prompt: pick(prompts), max_tokens: max, n, ...sampling() };
    if (rng() < 0.2) body.stop = [' the', '.'];
    if (rng() < 0.1) body.echo = true;
    checkCompletion(ok200(await post('/v1/completions', body), 'completion'), n, max, 'completion');
  },
  async completion_stream() {
    const n = rng() < 0.15 ? 2 : 1, max = rint(1, 24);
    const body = { prompt: pick(prompts), max_tokens: max, n, stream: true, ...sampling() };
    const usage = rng() < 0.5;
    if (usage) body.stream_options = { include_usage: true };
    const r = await post('/v1/completions', body);
    check(r.status === 200, `completion stream: HTTP ${r.status}: ${short(r.text)}`);
    const ev = sseEvents(r.text, 'completion stream');
    checkStreamChoices(ev.filter((e) => e.choices.length), n, 'text_completion', 'completion stream');
    if (usage) check(ev.at(-1).usage?.completion_tokens <= max * n, 'completion stream: usage chunk');
  },
  async chat() {
    const max = rint(1, 24);
    const j = ok200(await post('/v1/chat/completions', { messages: chatMessages(), max_tokens: max, ...sampling() }), 'chat');
    checkChat(j, 'chat');
    check(j.usage.completion_tokens <= max, `chat: ${j.usage.completion_tokens} tokens > ${max}`);
  },
  async chat_stream() {
    const body = { messages: chatMessages(), max_tokens: rint(1, 24), stream: true, ...sampling() };
    if (rng() < 0.5) body.stream_options = { include_usage: true };
    const r = await post('/v1/chat/completions', body);
    check(r.status === 200, `chat stream: HTTP ${r.status}: ${short(r.text)}`);
    const ev = sseEvents(r.text, 'chat stream').filter((e) => e.choices.length);
    check(ev[0]?.choices[0].delta?.role === 'assistant', 'chat stream: first delta has no role');
    checkStreamChoices(ev, 1, 'chat.completion.chunk', 'chat stream');
  },
  async generate() {
    const sp = { max_new_tokens: rint(1, 24), ...sampling() };
    if (rng() < 0.2) {
      const j = ok200(await post('/generate', { text: [pick(prompts), pick(prompts)], sampling_params: sp }), 'generate batch');
      check(Array.isArray(j) && j.length === 2, 'generate batch: not a list of 2');
      j.forEach((x) => checkGenerate(x, 'generate batch'));
    } else {
      checkGenerate(ok200(await post('/generate', { text: pick(prompts), sampling_params: sp }), 'generate'), 'generate');
    }
  },
  async generate_stream() {
    const r = await post('/generate', { text: pick(prompts), stream: true,
                                        sampling_params: { max_new_tokens: rint(1, 24), ...sampling() } });
    check(r.status === 200, `generate stream: HTTP ${r.status}: ${short(r.text)}`);
    const ev = sseEvents(r.text, 'generate stream');
    check(ev.length > 0, 'generate stream: no events');
    checkGenerate(ev.at(-1), 'generate stream (last event)');
  },
  async tools_auto() {
    const j = ok200(await post('/v1/chat/completions', {
      messages: [{ role: 'user', content: 'What is the weather in Bath?' }], tools,
      max_tokens: rint(8, 32), ...sampling() }), 'tools auto');
    const c = checkChat(j, 'tools auto');
    if (c.message.tool_calls) checkToolCalls(c.message.tool_calls, 'tools auto');
  },
  async tools_forced() {
    const choice = pick(['required', { type: 'function', function: { name: 'send_letter' } }]);
    const stream = rng() < 0.5;
    const body = { messages: [{ role: 'user', content: 'Write to Jane.' }], tools, tool_choice: choice,
                   max_tokens: 64, stream, ...sampling() };
    const r = await post('/v1/chat/completions', body);
    check(r.status === 200, `tools forced: HTTP ${r.status}: ${short(r.text)}`);
    let calls, finish;
    if (stream) {
      // Reassemble the calls from their deltas.
      const ev = sseEvents(r.text, 'tools forced stream').filter((e) => e.choices.length);
      calls = [];
      for (const e of ev) {
        for (const t of e.choices[0].delta?.tool_calls ?? []) {
          if (!calls[t.index]) calls[t.index] = { function: { name: t.function.name, arguments: '' } };
          calls[t.index].function.arguments += t.function.arguments ?? '';
        }
        finish = e.choices[0].finish_reason ?? finish;
      }
    } else {
      const c = checkChat(json(r, 'tools forced'), 'tools forced');
      calls = c.message.tool_calls;
      finish = c.finish_reason;
    }
    checkToolCalls(calls, 'tools forced');
    if (typeof choice === 'object') check(calls.every((t) => t.function.name === 'send_letter'), 'tools forced: wrong function');
    check(finish === 'tool_calls' || finish === 'length', `tools forced: finish_reason ${finish}`);
  },
  async json_schema() {
    const schema = { type: 'object', properties: { answer: { type: 'string', enum: ['yes', 'no'] },
                                                   score: { type: 'integer', minimum: 0, maximum: 9 } },
                     required: ['answer', 'score'], additionalProperties: false };
    const j = ok200(await post('/v1/chat/completions', {
      messages: [{ role: 'user', content: 'Is Bath pleasant?' }], max_tokens: 48, ...sampling(),
      response_format: { type: 'json_schema', json_schema: { name: 'a', schema, strict: true } } }), 'json_schema');
    const c = checkChat(j, 'json_schema');
    if (c.finish_reason === 'stop') {
      let v;
      try {
        v = JSON.parse(c.message.content);
      } catch {
        throw new Check(`json_schema: content not JSON: ${short(c.message.content)}`);
      }
      check(['yes', 'no'].includes(v.answer) && Number.isInteger(v.score) && Object.keys(v).length === 2,
            `json_schema: ${c.message.content} does not follow the schema`);
    }
  },
  async tokenize() {
    const text = Array.from({ length: rint(1, 40) }, () => pick(words)).join(' ');
    const t = ok200(await post('/tokenize', { prompt: text }), 'tokenize');
    check(Array.isArray(t.tokens) && t.count === t.tokens.length && t.count > 0, `tokenize: ${short(JSON.stringify(t))}`);
    const d = ok200(await post('/detokenize', { tokens: t.tokens }), 'detokenize');
    check(d.text === text, `detokenize: ${JSON.stringify(d.text)} != ${JSON.stringify(text)}`);
  },
  async info() {
    const p = pick(['/health', '/metrics', '/get_server_info', '/v1/models', '/get_model_info', '/version']);
    const r = await request('GET', p);
    check(r.status === 200, `${p}: HTTP ${r.status}`);
    if (p === '/metrics') check(r.text.includes('tandem:num_running_reqs'), '/metrics: no tandem:num_running_reqs');
    else if (p === '/get_server_info') check(Array.isArray(json(r, p).internal_states), `${p}: no internal_states`);
    else if (p === '/v1/models') check(json(r, p).data?.length === 1, `${p}: no model`);
  },
};
const goodWeights = { completion: 14, completion_stream: 14, chat: 10, chat_stream: 12, generate: 8,
                      generate_stream: 6, tools_auto: 4, tools_forced: 4, json_schema: 4, tokenize: 6, info: 8 };

// --- chaos: disconnects, slow clients ---------------------------------------------------------
// A stream long enough to be cut: ignore_eos keeps it running to max_tokens.
function longStreamBody() {
  return pick([
    ['/v1/completions', { prompt: pick(prompts), max_tokens: 200, ignore_eos: true, stream: true }],
    ['/v1/chat/completions', { messages: chatMessages(), max_tokens: 200, ignore_eos: true, stream: true }],
    ['/generate', { text: pick(prompts), stream: true, sampling_params: { max_new_tokens: 200, ignore_eos: true } }],
  ]);
}
const chaos = {
  // Reads a few events, then drops the connection.
  async disconnect_stream() {
    const [p, body] = longStreamBody();
    const events = rint(1, 6);
    await post(p, body, {
      onResponse: (res, req) => new Promise((resolve, reject) => {
        if (res.statusCode !== 200) return reject(new Check(`disconnect stream: HTTP ${res.statusCode}`));
        let seen = 0;
        res.on('data', (d) => {
          seen += (d.toString().match(/\n\n/g) ?? []).length;
          if (seen >= events) {
            req.destroy();  // the socket closes mid-stream
            resolve({ status: 200 });
          }
        });
        res.on('end', () => resolve({ status: 200 }));
        res.on('error', () => resolve({ status: 200 }));
      }),
    }).catch((e) => { if (e instanceof Check) throw e; });
  },
  // Gives up on a non-streamed request while it generates.
  async disconnect_wait() {
    const body = JSON.stringify({ prompt: pick(prompts), max_tokens: 200, ignore_eos: true });
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/completions',
                               headers: { 'Content-Type': 'application/json' } });
    req.on('error', () => {});
    req.end(body);
    await sleep(rint(20, 400));
    req.destroy();
  },
  // Reads the stream in small sips with pauses; the stream must still be complete and valid.
  async slow_reader() {
    const r = await post('/generate', { text: pick(prompts), stream: true,
                                        sampling_params: { max_new_tokens: rint(16, 48), temperature: 0 } }, {
      onResponse: (res) => new Promise((resolve, reject) => {
        const parts = [];
        res.on('data', (d) => {
          parts.push(d);
          res.pause();
          setTimeout(() => res.resume(), rint(20, 80));
        });
        res.on('error', reject);
        res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(parts).toString('utf8') }));
      }),
    });
    check(r.status === 200, `slow reader: HTTP ${r.status}`);
    checkGenerate(sseEvents(r.text, 'slow reader').at(-1), 'slow reader');
  },
  // Sends the body in pieces with pauses (about a second in all).
  async slow_sender() {
    const max = rint(1, 16);
    const body = Buffer.from(JSON.stringify({ prompt: pick(prompts), max_tokens: max, temperature: 0 }));
    const pieces = rint(4, 12);
    const r = await request('POST', '/v1/completions', {
      body, writeBody: async (req) => {
        const step = Math.ceil(body.length / pieces);
        for (let i = 0; i < body.length; i += step) {
          req.write(body.subarray(i, i + step));
          await sleep(rint(20, 100));
        }
        req.end();
      },
    });
    checkCompletion(ok200(r, 'slow sender'), 1, max, 'slow sender');
  },
};
const chaosWeights = { disconnect_stream: 5, disconnect_wait: 2, slow_reader: 2, slow_sender: 2 };

// --- bad requests -----------------------------------------------------------------------------
const deep = (n) => '['.repeat(n) + ']'.repeat(n);
const bad = [
  ['malformed JSON', 400, () => post('/v1/completions', '{"prompt": "hi", "max_tokens": ')],
  ['not an object', 400, () => post('/v1/chat/completions', '[1, 2, 3]')],
  ['max_tokens a string', 400, () => post('/v1/completions', { prompt: 'hi', max_tokens: 'ten' })],
  ['messages a string', 400, () => post('/v1/chat/completions', { messages: 'hi' })],
  ['temperature < 0', 400, () => post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], temperature: -1 })],
  ['text a number', 400, () => post('/generate', { text: 5 })],
  ['max_tokens 2^63-1', 400, () => post('/v1/completions', '{"prompt": "hi", "max_tokens": 9223372036854775807}')],
  ['max_tokens 2^64-1', 400, () => post('/v1/completions', '{"prompt": "hi", "max_tokens": 18446744073709551615}')],
  ['max_new_tokens 2^63-1', 400, () => post('/generate', '{"text": "hi", "sampling_params": {"max_new_tokens": 9223372036854775807}}')],
  ['n 1000', 400, () => post('/v1/completions', { prompt: 'hi', n: 1000 })],
  ['deep nesting in a field', 400, () => post('/v1/completions', `{"prompt": "hi", "x": ${deep(rint(200, 50000))}}`)],
  ['deep nesting in temperature', 400, () => post('/v1/chat/completions', `{"messages": [{"role": "user", "content": "hi"}], "temperature": ${deep(100000)}}`)],
  ['deep nesting in tools', 400, () => post('/v1/chat/completions', `{"messages": [{"role": "user", "content": "hi"}], "tools": ${deep(20000)}}`)],
  ['token id outside the vocabulary', 400, () => post('/detokenize', { tokens: [1, 999999999] })],
  ['prompt ids outside the vocabulary', 400, () => post('/v1/completions', { prompt: [5, -3], max_tokens: 2 })],
  ['unknown tool_choice', 400, () => post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], tools, tool_choice: { type: 'function', function: { name: 'nope' } } })],
  ['bad response_format', 400, () => post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], response_format: { type: 'xml' } })],
  ['no Content-Type', 415, () => request('POST', '/v1/completions', { body: '{"prompt": "hi"}', contentType: null })],
  ['form Content-Type', 415, () => request('POST', '/v1/completions', { body: 'prompt=hi', contentType: 'application/x-www-form-urlencoded' })],
  ['unknown route', 404, () => request('GET', '/v1/nothing-here')],
  ['wrong method', 405, () => request('GET', '/v1/completions')],
];

// --- very large requests ----------------------------------------------------------------------
// Built once; each takes seconds and allocates hundreds of MB inside the server.
let largeBodies = null;
function buildLarge() {
  const r = mulberry32(opt.seed + 7);
  const w = () => words[Math.floor(r() * words.length)];
  let prompt = '';
  const parts = [];
  while (prompt.length < 10_000_000) {
    parts.length = 0;
    for (let i = 0; i < 100_000; i++) parts.push(w());
    prompt += `${parts.join(' ')} `;
  }
  const chat = Array.from({ length: 100_000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `message ${i} ${w()}` }));
  const manyTools = Array.from({ length: 20_000 }, (_, i) => ({ type: 'function', function: {
    name: `f${i}`, description: 'does a thing', parameters: { type: 'object', properties: { a: { type: 'string' } } } } }));
  largeBodies = [
    // Past the context: 400 after the whole prompt is parsed and tokenized.
    ['10 MB prompt', '/v1/completions', JSON.stringify({ prompt, max_tokens: 4 }), 400],
    ['100k-message chat', '/v1/chat/completions', JSON.stringify({ messages: chat, max_tokens: 4 }), 400],
    ['20k tools', '/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], tools: manyTools, max_tokens: 4 }), 400],
    ['10 MB tokenize', '/tokenize', JSON.stringify({ prompt }), 200],
    ['33 MB body', '/v1/completions', JSON.stringify({ prompt: prompt + prompt + prompt + prompt.slice(0, 4_000_000) }), 413],
  ];
}

// --- bookkeeping ------------------------------------------------------------------------------
const stats = new Map();  // kind -> {n, failed, ms: []}
const failures = [];
function record(kind, ms, err) {
  let s = stats.get(kind);
  if (!s) stats.set(kind, (s = { n: 0, failed: 0, ms: [] }));
  s.n++;
  s.ms.push(ms);
  if (err) {
    s.failed++;
    if (failures.length < 30) failures.push(`${kind}: ${err.message ?? err}`);
  }
}
async function runOne(kind, fn) {
  const t0 = now();
  try {
    await fn();
    record(kind, now() - t0, null);
  } catch (e) {
    record(kind, now() - t0, e);
  }
}
async function runBad([name, want, fn]) {
  await runOne(`bad: ${name}`, async () => {
    const r = await fn();
    check(r.status === want, `HTTP ${r.status}, expected ${want}: ${short(r.text)}`);
    const j = json(r, name);
    check(j.error && typeof j.error.message === 'string' && j.error.code === want,
          `not an error envelope: ${short(r.text)}`);
  });
}
async function runLarge(i) {
  const [name, p, body, want] = largeBodies[i % largeBodies.length];
  await runOne(`large: ${name}`, async () => {
    const r = await request('POST', p, { body, timeoutMs: 600_000 });
    check(r.status === want, `HTTP ${r.status}, expected ${want}: ${short(r.text)}`);
    if (want !== 200) check(json(r, name).error, 'no error envelope');
  });
}
function weighted(weights) {
  const total = Object.values(weights).reduce((a, b) => a + b, 0);
  let x = rng() * total;
  for (const [k, w] of Object.entries(weights)) if ((x -= w) < 0) return k;
  return Object.keys(weights)[0];
}
// The mix: 75% good, 12% chaos, 13% bad.
function nextJob() {
  const x = rng();
  if (x < 0.75) { const k = weighted(goodWeights); return () => runOne(k, good[k]); }
  if (x < 0.87) { const k = weighted(chaosWeights); return () => runOne(`chaos: ${k}`, chaos[k]); }
  const b = pick(bad);
  return () => runBad(b);
}

// --- health poller and resource sampler -------------------------------------------------------
const healthAgent = new http.Agent({ keepAlive: false });
const health = { n: 0, failed: 0, maxMs: 0, errors: [] };
let polling = true;
async function pollHealth() {
  while (polling) {
    const t0 = now();
    try {
      const r = await request('GET', '/health', { agentFor: healthAgent, timeoutMs: 10_000 });
      if (r.status !== 200) throw new Error(`HTTP ${r.status}`);
    } catch (e) {
      health.failed++;
      if (health.errors.length < 5) health.errors.push(e.message);
    }
    health.n++;
    health.maxMs = Math.max(health.maxMs, now() - t0);
    await sleep(250);
  }
}
const peak = { rssMiB: 0, threads: 0, fds: 0 };
async function sampleResources() {
  while (polling) {
    if (serverExit) return;
    const s = procStatus();
    for (const k of Object.keys(peak)) peak[k] = Math.max(peak[k], s[k]);
    await sleep(500);
  }
}

// --- the run ----------------------------------------------------------------------------------
const checks = [];  // [name, ok, detail]
const t0 = now();
for (let i = 0; i < 3000; i++) {
  const r = await request('GET', '/health', { agentFor: healthAgent, timeoutMs: 5000 }).catch(() => null);
  if (r?.status === 200) break;
  if (serverExit) die(`server exited while loading (${JSON.stringify(serverExit)})`);
  await sleep(100);
}
console.log(`server pid ${pid} on http://127.0.0.1:${port} (${opt.speculative ? 'MTP speculative decoding' : 'default settings'}), log ${logPath}`);
const info0 = await serverInfo();

// Warm-up: every good kind at full concurrency, so that worker threads, caches and the
// allocator's arenas are in use before the baseline is taken.
{
  const kinds = Object.keys(good);
  const jobs = [];
  for (let i = 0; i < Math.max(opt.concurrency * 3, kinds.length * 4); i++) jobs.push(kinds[i % kinds.length]);
  await Promise.all(Array.from({ length: opt.concurrency }, async () => {
    for (let k; (k = jobs.pop());) await runOne(`warm-up: ${k}`, good[k]);
  }));
  agent.destroy();
}
const warmFailed = [...stats].filter(([k]) => k.startsWith('warm-up')).reduce((a, [, s]) => a + s.failed, 0);
if (warmFailed) die(`${warmFailed} warm-up requests failed:\n  ${failures.join('\n  ')}`);
stats.clear();
await sleep(2500);  // the server notices the closed connections; the trimmer runs once
const base = await settledStatus();
console.log(`baseline after warm-up: RSS ${base.rssMiB.toFixed(0)} MiB, ${base.threads} threads, ${base.fds} fds`);
buildLarge();

const healthLoop = pollHealth();
const sampler = sampleResources();
let issued = 0, timedOut = false;
const largeEvery = opt.large > 0 ? Math.floor(opt.requests / (opt.large + 1)) : Infinity;
const deadline = t0 + opt.maxSeconds * 1000;
let lastReport = now();
await Promise.all(Array.from({ length: opt.concurrency }, async () => {
  while (issued < opt.requests) {
    if (now() > deadline) {
      timedOut = true;
      return;
    }
    if (serverExit) return;
    const i = issued++;
    if (largeEvery !== Infinity && i > 0 && i % largeEvery === 0 && i / largeEvery <= opt.large)
      await runLarge(i / largeEvery - 1);
    else await nextJob()();
    if (now() - lastReport > 30_000) {
      lastReport = now();
      const failed = [...stats.values()].reduce((a, s) => a + s.failed, 0);
      console.log(`  ${issued} / ${opt.requests} issued, ${failed} failed, ${((now() - t0) / 1000).toFixed(0)} s`);
    }
  }
}));
const loadSeconds = (now() - t0) / 1000;
agent.destroy();
polling = false;
await healthLoop;
await sampler;
if (serverExit) die(`the server exited during the run (${JSON.stringify(serverExit)})`);

// --- end state --------------------------------------------------------------------------------
checks.push(['all requests issued within --max-seconds', !timedOut, `${issued} in ${loadSeconds.toFixed(0)} s`]);
let idle = null;
for (let i = 0; i < 120; i++) {
  const s = await serverInfo();
  if (s.num_running_reqs === 0 && s.num_queue_reqs === 0) {
    idle = s;
    break;
  }
  await sleep(500);
}
checks.push(['no running or queued requests at the end', idle !== null,
             idle ? 'running 0, queued 0' : 'still busy after 60 s']);
if (idle) {
  checks.push(['no KV page held by a request', idle.kv_pages_used === idle.kv_pages_cached,
               `used ${idle.kv_pages_used}, prefix cache ${idle.kv_pages_cached}, total ${idle.kv_pages_total}`]);
  const f = await request('POST', '/flush_cache', { agentFor: healthAgent });
  const after = await serverInfo();
  checks.push(['all KV pages free after /flush_cache', f.status === 200 && after.kv_pages_used === 0,
               `HTTP ${f.status}, used ${after.kv_pages_used}`]);
  checks.push(['every engine request finished', after.requests_finished === after.requests_total,
               `${after.requests_finished - info0.requests_finished} of ${after.requests_total - info0.requests_total} submitted`]);
}
// The trimmer looks once a second; give it a few.
let fin = await settledStatus();
for (let i = 0; i < 10 && fin.rssMiB > base.rssMiB * (1 + opt.rssTolerance); i++) {
  await sleep(1000);
  fin = await settledStatus(2, 250);
}
const rssRatio = fin.rssMiB / base.rssMiB;
checks.push([`RSS within ${opt.rssTolerance * 100}% of the baseline`, rssRatio <= 1 + opt.rssTolerance,
             `${base.rssMiB.toFixed(0)} -> peak ${peak.rssMiB.toFixed(0)} -> ${fin.rssMiB.toFixed(0)} MiB (${((rssRatio - 1) * 100).toFixed(1)}%)`]);
checks.push(['no fd growth', fin.fds <= base.fds, `${base.fds} -> peak ${peak.fds} -> ${fin.fds}`]);
checks.push(['no thread growth', fin.threads <= base.threads, `${base.threads} -> peak ${peak.threads} -> ${fin.threads}`]);
checks.push(['healthy throughout (/health every 250 ms)', health.failed === 0,
             `${health.n} polls, ${health.failed} failed${health.errors.length ? ` (${health.errors.join('; ')})` : ''}, slowest ${health.maxMs.toFixed(0)} ms`]);

// Graceful stop: SIGTERM with nothing in flight exits 0.
server.kill('SIGTERM');
for (let i = 0; i < 300 && !serverExit; i++) await sleep(100);
checks.push(['SIGTERM exits 0', serverExit?.code === 0, JSON.stringify(serverExit)]);
if (!serverExit) server.kill('SIGKILL');

// --- summary ----------------------------------------------------------------------------------
const pct = (xs, p) => {
  if (!xs.length) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};
const rows = [...stats].sort(([a], [b]) => a.localeCompare(b));
const w = Math.max(...rows.map(([k]) => k.length), 10);
console.log(`\n${'kind'.padEnd(w)}  ${'count'.padStart(6)}  ${'failed'.padStart(6)}  ${'p50 ms'.padStart(8)}  ${'p99 ms'.padStart(8)}`);
let total = 0, totalFailed = 0;
for (const [k, s] of rows) {
  total += s.n;
  totalFailed += s.failed;
  console.log(`${k.padEnd(w)}  ${String(s.n).padStart(6)}  ${String(s.failed).padStart(6)}  ` +
              `${pct(s.ms, 0.5).toFixed(0).padStart(8)}  ${pct(s.ms, 0.99).toFixed(0).padStart(8)}`);
}
console.log(`${'total'.padEnd(w)}  ${String(total).padStart(6)}  ${String(totalFailed).padStart(6)}`);
const by = (pre) => rows.filter(([k]) => (pre ? k.startsWith(pre) : !k.includes(':')))
  .reduce((a, [, s]) => [a[0] + s.n, a[1] + s.failed], [0, 0]);
const [gn, gf] = by(null), [cn, cf] = by('chaos:'), [bn, bf] = by('bad:'), [ln, lf] = by('large:');
checks.unshift(
  ['every good request got a valid response', gf === 0, `${gn - gf} of ${gn}`],
  ['slow clients completed, disconnects did no harm', cf === 0, `${cn - cf} of ${cn}`],
  ['every bad request got its 4xx JSON error', bf === 0, `${bn - bf} of ${bn}`],
  ['every large request got its answer', lf === 0, `${ln - lf} of ${ln}`],
);
console.log(`\n${total} requests in ${loadSeconds.toFixed(0)} s (${(total / loadSeconds).toFixed(1)}/s), concurrency ${opt.concurrency}, seed ${opt.seed}`);
let ok = true;
for (const [name, pass, detail] of checks) {
  ok &&= pass;
  console.log(`${pass ? 'ok  ' : 'FAIL'} ${name}: ${detail}`);
}
if (failures.length) console.log(`\nfirst failures:\n  ${failures.join('\n  ')}`);
if (!ok) console.log(`\n--- server log (tail) ${logPath}\n${readLog().split('\n').slice(-30).join('\n')}`);
else fs.rmSync(work, { recursive: true, force: true });
console.log(ok ? '\nsoak: PASS' : '\nsoak: FAIL');
process.exit(ok ? 0 : 1);
