// Drives a running `tandem serve` with the official OpenAI Node client (openai@6.49.0).
// Usage: node openai_client.mjs http://127.0.0.1:PORT
// Prints one line per check and exits non-zero if any failed.
import OpenAI from 'openai';

const base = process.argv[2];
if (!base) {
  console.error('usage: node openai_client.mjs http://HOST:PORT');
  process.exit(2);
}
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 300_000 });

let failures = 0;
function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}
function eq(a, b, what) {
  if (JSON.stringify(a) !== JSON.stringify(b))
    throw new Error(`${what}: ${JSON.stringify(a)} !== ${JSON.stringify(b)}`);
}
const only = process.env.E2E_ONLY;  // run only the checks whose name contains this
async function test(name, fn) {
  if (only && !name.includes(only)) return;
  const t0 = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
  }
}
async function getJson(path) {
  const r = await fetch(`${base}${path}`);
  check(r.ok, `${path} -> ${r.status}`);
  return r.json();
}
async function postJson(path, body) {
  const r = await fetch(`${base}${path}`, { method: 'POST', body: JSON.stringify(body),
                                            headers: { 'Content-Type': 'application/json' } });
  check(r.ok, `${path} -> ${r.status}`);
  return r.json();
}
// POSTs a streaming request and returns the parsed data events before [DONE].
async function postSse(path, body) {
  const r = await fetch(`${base}${path}`, { method: 'POST', body: JSON.stringify(body),
                                            headers: { 'Content-Type': 'application/json' } });
  check(r.ok, `${path} -> ${r.status}`);
  const text = await r.text();
  check(text.endsWith('data: [DONE]\n\n'), 'stream ends with [DONE]');
  return text.split('\n\n').filter((e) => e.startsWith('data: {')).map((e) => JSON.parse(e.slice(6)));
}
const withoutCache = (u) => ({ ...u, prompt_tokens_details: undefined });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Collects a streamed completion: text per choice, finish reasons, chunks, usage.
async function streamCompletion(params) {
  const stream = await client.completions.create({ ...params, stream: true });
  const text = [], finish = [], matched = [];
  let usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    eq(chunk.object, 'text_completion', 'chunk object');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text[c.index] = (text[c.index] ?? '') + c.text;
      if (c.finish_reason) {
        finish[c.index] = c.finish_reason;
        matched[c.index] = c.matched_stop;
      }
    }
  }
  return { text, finish, matched, usage, chunks };
}

async function streamChat(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true });
  const content = [], reasoning = [], finish = [], roleFirst = [];
  let usage = null, chunks = 0, usageChunkLast = false;
  for await (const chunk of stream) {
    chunks++;
    eq(chunk.object, 'chat.completion.chunk', 'chunk object');
    usageChunkLast = false;
    if (chunk.usage) {
      usage = chunk.usage;
      usageChunkLast = chunk.choices.length === 0;
    }
    for (const c of chunk.choices) {
      const i = c.index;
      if (roleFirst[i] === undefined) roleFirst[i] = c.delta.role === 'assistant';
      content[i] = (content[i] ?? '') + (c.delta.content ?? '');
      reasoning[i] = (reasoning[i] ?? '') + (c.delta.reasoning_content ?? '');
      if (c.finish_reason) finish[i] = c.finish_reason;
    }
  }
  return { content, reasoning, finish, roleFirst, usage, chunks, usageChunkLast };
}

const PROMPTS = [
  'It is a truth universally acknowledged, that',
  'Emma Woodhouse, handsome, clever, and rich,',
  '"My dear Mr. Bennet," said his lady to him one day,',
  'The next morning Elinor',
  'Café au lait, said Mr. Darcy — “is',
  'Captain Wentworth had no fortune.',
];

await test('models.list', async () => {
  const models = await client.models.list();
  check(models.data.length === 1, 'one model');
  const m = models.data[0];
  eq(m.object, 'model', 'object');
  eq(m.owned_by, 'tandem', 'owned_by');
  check(typeof m.id === 'string' && m.id.length > 0, 'id');
  check(m.max_model_len > 0, 'max_model_len');
  const one = await client.models.retrieve(m.id);
  eq(one.id, m.id, 'retrieve');
});

await test('completions: stream == non-stream (greedy)', async () => {
  for (const prompt of PROMPTS) {
    const p = { model: 'default', prompt, max_tokens: 40, temperature: 0 };
    const full = await client.completions.create(p);
    const st = await streamCompletion({ ...p, stream_options: { include_usage: true } });
    const c = full.choices[0];
    eq(st.text[0], c.text, `text for ${JSON.stringify(prompt)}`);
    eq(st.finish[0], c.finish_reason, 'finish_reason');
    check(c.text.length > 0, 'non-empty text');
    check(['stop', 'length'].includes(c.finish_reason), 'finish reason value');
    check(full.usage.prompt_tokens > 0, 'prompt_tokens');
    eq(full.usage.total_tokens, full.usage.prompt_tokens + full.usage.completion_tokens, 'total');
    // The second run of a prompt may hit the prefix cache, so cached_tokens may differ.
    eq(withoutCache(st.usage), withoutCache(full.usage), 'usage chunk equals non-stream usage');
    check(st.chunks > 2, 'several chunks');
  }
});

await test('completions: seeded sampling with multi-byte output, stream == non-stream', async () => {
  // The default model writes ASCII when greedy; at a high temperature it picks single-byte
  // tokens of UTF-8 sequences, which only join into characters (or U+FFFD) across tokens.
  let nonAscii = 0;
  for (let seed = 1; seed <= 8; seed++) {
    const p = { model: 'default', prompt: PROMPTS[seed % PROMPTS.length], max_tokens: 64,
                temperature: 50, seed, ignore_eos: true };
    const full = await client.completions.create(p);
    const st = await streamCompletion(p);
    eq(st.text[0], full.choices[0].text, `sampled text, seed ${seed}`);
    eq(full.usage.completion_tokens, 64, 'ignore_eos runs to max_tokens');
    if (/[^\x00-\x7f]/.test(full.choices[0].text)) nonAscii++;
    const again = await client.completions.create(p);
    eq(again.choices[0].text, full.choices[0].text, `same seed, same text (seed ${seed})`);
    // The streamed text against the tokenizer's whole-sequence decode of the same ids (an
    // independent path from the incremental detokenizer): SGLang's /generate streams the ids.
    const gen = await postSse('/generate', {
      text: p.prompt, stream: true,
      sampling_params: { max_new_tokens: 64, temperature: 50, seed, ignore_eos: true } });
    const last = gen.at(-1);
    eq(last.text, full.choices[0].text, `/generate text, seed ${seed}`);
    const dec = await postJson('/detokenize', { tokens: last.output_ids });
    eq(dec.text, last.text, `decode(output_ids) equals the streamed text, seed ${seed}`);
  }
  check(nonAscii >= 2, `outputs with non-ASCII characters: ${nonAscii} (want >= 2)`);
});

await test('completions: n, echo, token-id prompts, prompt lists', async () => {
  const r = await client.completions.create({ model: 'm', prompt: 'She was', max_tokens: 12,
                                              temperature: 1, seed: 5, n: 3 });
  eq(r.choices.map((c) => c.index), [0, 1, 2], 'choice indexes');
  const st = await streamCompletion({ model: 'm', prompt: 'She was', max_tokens: 12,
                                      temperature: 1, seed: 5, n: 3 });
  eq(st.text, r.choices.map((c) => c.text), 'n=3 streamed texts');
  check(new Set(r.choices.map((c) => c.text)).size > 1, 'choices differ');
  const echo = await client.completions.create({ model: 'm', prompt: 'Elinor said', max_tokens: 5,
                                                 temperature: 0, echo: true });
  check(echo.choices[0].text.startsWith('Elinor said'), 'echo prefix');
  const ids = await client.completions.create({ model: 'm', prompt: [40, 41, 42, 43], max_tokens: 4,
                                                temperature: 0 });
  eq(ids.usage.prompt_tokens, 4, 'token-id prompt length');
  const two = await client.completions.create({ model: 'm', prompt: ['A', 'B b'], max_tokens: 3,
                                                temperature: 0 });
  eq(two.choices.length, 2, 'two prompts, two choices');
});

await test('completions: stop strings spanning tokens', async () => {
  const p = { model: 'm', prompt: PROMPTS[0], max_tokens: 48, temperature: 0, ignore_eos: true };
  const full = (await client.completions.create(p)).choices[0].text;
  const at = Math.floor(full.length / 2);
  const stop = full.slice(at, at + 5);
  const cut = full.indexOf(stop);
  const r = await client.completions.create({ ...p, stop: [stop, 'zzzz-never'] });
  eq(r.choices[0].text, full.slice(0, cut), 'text cut before the stop string');
  eq(r.choices[0].finish_reason, 'stop', 'finish_reason');
  eq(r.choices[0].matched_stop, stop, 'matched_stop');
  const st = await streamCompletion({ ...p, stop });
  eq(st.text[0], full.slice(0, cut), 'streamed text cut before the stop string');
  eq(st.matched[0], stop, 'streamed matched_stop');
  const kept = await client.completions.create({ ...p, stop, no_stop_trim: true });
  eq(kept.choices[0].text, full.slice(0, cut + stop.length), 'no_stop_trim keeps it');
});

await test('chat: stream == non-stream, enable_thinking either way, usage chunk', async () => {
  for (const thinking of [true, false]) {
    for (const prompt of PROMPTS.slice(0, 4)) {
      const p = { model: 'm', messages: [{ role: 'system', content: 'You are terse.' },
                                         { role: 'user', content: prompt }],
                  max_tokens: 32, temperature: 0,
                  chat_template_kwargs: { enable_thinking: thinking } };
      const full = await client.chat.completions.create(p);
      const msg = full.choices[0].message;
      eq(msg.role, 'assistant', 'role');
      const st = await streamChat({ ...p, stream_options: { include_usage: true } });
      eq(st.content[0], msg.content, 'content');
      eq(st.reasoning[0], msg.reasoning_content ?? '', 'reasoning_content');
      eq(st.finish[0], full.choices[0].finish_reason, 'finish_reason');
      check(st.roleFirst[0], 'first delta carries the role');
      check(st.usageChunkLast, 'usage chunk with choices: [] comes last');
      eq(withoutCache(st.usage), withoutCache(full.usage), 'usage');
      // No reasoning parser by default, and the default model's template opens no <think>
      // whatever enable_thinking says: everything is content.
      check(msg.content.length > 0, 'content');
      check(!('reasoning_content' in msg), 'no reasoning_content without --reasoning-parser');
    }
  }
});

await test('chat: n, seed, max_completion_tokens, stop', async () => {
  const p = { model: 'm', messages: [{ role: 'user', content: 'Tell me about Bath.' }],
              max_completion_tokens: 16, temperature: 0.9, seed: 11, n: 2,
              chat_template_kwargs: { enable_thinking: false } };
  const a = await client.chat.completions.create(p);
  const b = await streamChat(p);
  eq(a.choices.length, 2, 'two choices');
  eq(b.content, a.choices.map((c) => c.message.content), 'n=2 streamed contents');
  check(a.usage.completion_tokens <= 32, 'max_completion_tokens');
  const g = { ...p, n: 1, temperature: 0, max_completion_tokens: 40 };
  const text = (await client.chat.completions.create(g)).choices[0].message.content;
  const stop = text.slice(10, 14);
  const s = await client.chat.completions.create({ ...g, stop });
  eq(s.choices[0].message.content, text.slice(0, text.indexOf(stop)), 'chat stop string');
  eq(s.choices[0].finish_reason, 'stop', 'chat stop finish_reason');
});

// Collects a streamed chat with tools: content, and the calls put together by index from their
// deltas (the first with id, type and name, then argument fragments).
async function streamChatTools(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true });
  let content = '', finish = null;
  const calls = [];
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      content += c.delta.content ?? '';
      for (const t of c.delta.tool_calls ?? []) {
        if (t.id) {
          eq(t.index, calls.length, 'a new call comes with the next index');
          eq(t.type, 'function', 'type of a new call');
          calls.push({ id: t.id, name: t.function.name, arguments: t.function.arguments });
        } else {
          check(t.index === calls.length - 1, 'fragments belong to the last call');
          calls[t.index].arguments += t.function.arguments;
        }
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { content, calls, finish };
}

const TOOLS = [{ type: 'function', function: {
  name: 'get_weather', description: 'Current weather of a city.',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }];

await test('chat: two-turn tool conversation (tool_choice auto), stream == non-stream', async () => {
  const question = [{ role: 'user', content: 'What is the weather in Bath?' }];
  const p1 = { model: 'm', messages: question, tools: TOOLS, tool_choice: 'auto', max_tokens: 32,
               temperature: 0 };
  const r1 = await client.chat.completions.create(p1);
  const m1 = r1.choices[0].message;
  // A small model rarely calls a tool by itself: either a call or text is a good answer.
  if (m1.tool_calls?.length) {
    eq(r1.choices[0].finish_reason, 'tool_calls', 'finish_reason with calls');
    for (const c of m1.tool_calls) {
      check(c.id.startsWith('call_') && c.type === 'function', 'call id and type');
      eq(c.function.name, 'get_weather', 'only declared functions are returned');
      JSON.parse(c.function.arguments);
    }
  } else {
    check(typeof m1.content === 'string', 'text answer');
    check(r1.choices[0].finish_reason !== 'tool_calls', 'no tool_calls finish without calls');
  }
  const s1 = await streamChatTools(p1);
  eq(s1.content, m1.content ?? '', 'streamed content');
  eq(s1.calls.map((c) => [c.name, c.arguments]),
     (m1.tool_calls ?? []).map((c) => [c.function.name, c.function.arguments]), 'streamed calls');
  eq(s1.finish, r1.choices[0].finish_reason, 'streamed finish_reason');

  // Turn 2: the call (the model's, or one made up) and its result, answered by the model.
  const call = m1.tool_calls?.[0] ?? { id: 'call_e2e', type: 'function',
    function: { name: 'get_weather', arguments: JSON.stringify({ city: 'Bath' }) } };
  const p2 = { ...p1, messages: [...question, { role: 'assistant', content: null, tool_calls: [call] },
                                 { role: 'tool', tool_call_id: call.id, content: 'Rain, as ever.' }] };
  const r2 = await client.chat.completions.create(p2);
  check(r2.usage.prompt_tokens > r1.usage.prompt_tokens, 'the call and its result are in the prompt');
  check(r2.usage.completion_tokens > 0, 'turn 2 answered');
  const s2 = await streamChatTools(p2);
  eq(s2.content, r2.choices[0].message.content ?? '', 'turn 2 streamed content');
  eq(s2.calls.length, (r2.choices[0].message.tool_calls ?? []).length, 'turn 2 streamed calls');

  // A forced call (constrained decoding; structured_client.mjs checks the arguments in depth):
  // the answer is a call of get_weather, streamed as non-streamed.
  for (const tool_choice of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
    const r = await client.chat.completions.create({ ...p1, tool_choice, max_tokens: 64 });
    const calls = r.choices[0].message.tool_calls ?? [];
    check(calls.length >= 1 && calls[0].function.name === 'get_weather',
          `tool_choice ${JSON.stringify(tool_choice)}: ${JSON.stringify(r.choices[0].message)}`);
    const s = await streamChatTools({ ...p1, tool_choice, max_tokens: 64 });
    eq(s.calls.map((c) => c.name), calls.map((c) => c.function.name), 'forced calls streamed');
  }
});

await test('errors: 400s through the client', async () => {
  const bad = async (params, param, api = 'chat') => {
    try {
      if (api === 'chat') await client.chat.completions.create(params);
      else await client.completions.create(params);
    } catch (e) {
      check(e instanceof OpenAI.BadRequestError, `BadRequestError, got ${e?.constructor?.name}: ${e}`);
      eq(e.status, 400, 'status');
      eq(e.type, 'BadRequestError', 'type');
      if (param) eq(e.param, param, 'param');
      return e;
    }
    throw new Error(`no error for ${JSON.stringify(params)}`);
  };
  const msgs = [{ role: 'user', content: 'hi' }];
  await bad({ model: 'm', messages: msgs, temperature: -1 }, 'temperature');
  await bad({ model: 'm', messages: msgs, top_p: 1.5 }, 'top_p');
  await bad({ model: 'm', messages: msgs, max_tokens: 0 }, 'max_tokens');
  await bad({ model: 'm', messages: msgs, n: 0 }, 'n');
  await bad({ model: 'm', messages: [] }, 'messages');
  await bad({ model: 'm', messages: msgs, stream: true, temperature: -2 }, 'temperature');
  await bad({ model: 'm', prompt: 'x', max_tokens: 'many' }, 'max_tokens', 'completions');
  const e = await bad({ model: 'm', prompt: Array(5000).fill(40), max_tokens: 8 }, null, 'completions');
  check(/5000/.test(e.message) && /4096|context/.test(e.message), `context message: ${e.message}`);
  const e2 = await bad({ model: 'm', prompt: 'hi', max_tokens: 100000 }, 'max_tokens', 'completions');
  check(/100000/.test(e2.message), `names max_tokens: ${e2.message}`);
});

await test(`concurrency: 32 streams complete, outputs match solo runs`, async () => {
  const jobs = [];
  for (let i = 0; i < 32; i++) {
    const prompt = `${PROMPTS[i % PROMPTS.length]} (${i})`;
    jobs.push({ model: 'm', prompt, max_tokens: 24 + (i % 5) * 8, temperature: 0, ignore_eos: true });
  }
  const results = await Promise.all(jobs.map((p) => streamCompletion(p)));
  results.forEach((r, i) => {
    eq(r.finish[0], 'length', `stream ${i} finished`);
    check(r.text[0].length > 0, `stream ${i} text`);
  });
  // Greedy decoding is batch-invariant on the CPU backend: the same request alone gives the
  // same text.
  for (const i of [0, 7, 19, 31]) {
    const solo = await client.completions.create(jobs[i]);
    eq(results[i].text[0], solo.choices[0].text, `stream ${i} alone and in a batch of 32`);
  }
});

await test('disconnects: aborted streams free the engine, others finish', async () => {
  const before = (await getJson('/get_server_info')).internal_states[0];
  const long = (i) => ({ model: 'm', prompt: `${PROMPTS[i % PROMPTS.length]} [${i}]`,
                         max_tokens: 3500, temperature: 0, ignore_eos: true });
  const survivors = [0, 1].map((i) => streamCompletion({ ...long(i), max_tokens: 64 }));
  const aborted = [];
  for (let i = 0; i < 8; i++) {
    aborted.push((async () => {
      const stream = await client.completions.create({ ...long(i), stream: true });
      let n = 0;
      try {
        for await (const _ of stream) {
          if (++n === 3) stream.controller.abort();
        }
      } catch (e) {
        check(e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError', `abort error: ${e}`);
      }
      return n;
    })());
  }
  const counts = await Promise.all(aborted);
  counts.forEach((n) => check(n >= 3, 'got chunks before aborting'));
  for (const r of await Promise.all(survivors)) eq(r.finish[0], 'length', 'survivor finished');
  // 8 x 3500 tokens would take far longer than this if the requests kept running.
  let s;
  for (let t = 0; t < 100; t++) {
    s = (await getJson('/get_server_info')).internal_states[0];
    if (s.num_running_reqs === 0 && s.num_queue_reqs === 0) break;
    await sleep(100);
  }
  eq([s.num_running_reqs, s.num_queue_reqs], [0, 0], 'no request left running after disconnects');
  check(s.generation_tokens_total - before.generation_tokens_total < 8 * 3500,
        'aborted requests stopped generating');
  const metrics = await (await fetch(`${base}/metrics`)).text();
  const m = metrics.match(/^tandem:request_success_total\{[^}]*finished_reason="abort"\} (\d+)/m);
  check(m && Number(m[1]) >= 8, `abort counter >= 8: ${m && m[1]}`);
});

console.log(failures ? `${failures} check group(s) failed` : 'all OpenAI-client checks passed');
process.exit(failures ? 1 : 0);
