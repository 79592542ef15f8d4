// Structured outputs end to end: the official OpenAI Node client (chat.completions.parse with a
// JSON schema, response_format json_object) and SGLang's /generate (json_schema, regex, ebnf)
// against a running `tandem serve`. Every constrained output is validated against its schema
// with ajv (an independent validator), greedy and sampled, streamed and not; refused schemas get
// a 400 that names the keyword.
// Usage: node structured_client.mjs http://127.0.0.1:PORT [OUTPUTS_FILE]
// OUTPUTS_FILE, if given, receives the greedy outputs as JSON, so that run.sh can check that the
// speculative server produces exactly the plain server's constrained text.
import { writeFileSync } from 'node:fs';
import Ajv from 'ajv';
import OpenAI from 'openai';

const base = process.argv[2];
const outputsFile = process.argv[3];
if (!base) {
  console.error('usage: node structured_client.mjs http://HOST:PORT [OUTPUTS_FILE]');
  process.exit(2);
}
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 300_000 });
const ajv = new Ajv({ strict: false });

let failures = 0;
const outputs = {};
function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}
async function test(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
  }
}
async function post(path, body) {
  const r = await fetch(`${base}${path}`, { method: 'POST', body: JSON.stringify(body),
                                            headers: { 'Content-Type': 'application/json' } });
  return { status: r.status, body: await r.json() };
}
function validates(schema, text, what) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new Error(`${what}: output is not JSON: ${JSON.stringify(text)}`);
  }
  const ok = ajv.validate(schema, value);
  check(ok, `${what}: ${JSON.stringify(value)} fails its schema: ${ajv.errorsText()}`);
  return value;
}

// Schemas whose instances are short (bounded strings and arrays), so that even a model trained
// on novels finishes them well within max_tokens.
const SCHEMAS = {
  person: {
    type: 'object',
    properties: {
      name: { type: 'string', maxLength: 24 },
      age: { type: 'integer', minimum: 0, maximum: 120 },
      married: { type: 'boolean' },
    },
    required: ['name', 'age', 'married'],
    additionalProperties: false,
  },
  enums_and_arrays: {
    type: 'object',
    properties: {
      estate: { enum: ['Pemberley', 'Netherfield', 'Longbourn'] },
      daughters: { type: 'array', items: { type: 'string', maxLength: 12 }, minItems: 1, maxItems: 3 },
      income: { type: 'number' },
    },
    required: ['estate', 'daughters'],
    additionalProperties: false,
  },
  nested_refs: {
    type: 'object',
    $defs: { letter: { type: 'object', properties: { to: { type: 'string', maxLength: 16 },
                                                     sealed: { type: 'boolean' } },
                       required: ['to', 'sealed'], additionalProperties: false } },
    properties: { letters: { type: 'array', items: { $ref: '#/$defs/letter' }, maxItems: 2 },
                  date: { type: 'string', pattern: '^1[78][0-9]{2}-[01][0-9]-[0-3][0-9]$' } },
    required: ['letters', 'date'],
    additionalProperties: false,
  },
  any_of: {
    anyOf: [{ type: 'integer', minimum: 10, maximum: 99 }, { type: 'string', maxLength: 10 }, { type: 'null' }],
  },
};

const CHAT = [{ role: 'user', content: 'Describe a character from Pride and Prejudice as JSON.' }];

await test('chat.completions.parse with a strict json_schema (greedy): parsed and valid', async () => {
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    if (name === 'any_of') continue;  // parse() expects an object schema
    const r = await client.chat.completions.parse({
      model: 'default', messages: CHAT, temperature: 0, max_tokens: 400,
      response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } },
    });
    const m = r.choices[0].message;
    check(r.choices[0].finish_reason === 'stop', `${name}: finish_reason ${r.choices[0].finish_reason}`);
    validates(schema, m.content, name);
    check(m.parsed && typeof m.parsed === 'object', `${name}: message.parsed`);
    outputs[`chat_${name}`] = m.content;
  }
});

await test('json_schema, sampled (temperature 1, 8 seeds each): every output valid', async () => {
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    for (let seed = 0; seed < 8; seed++) {
      const r = await client.chat.completions.create({
        model: 'default', messages: CHAT, temperature: 1, seed, max_tokens: 400,
        response_format: { type: 'json_schema', json_schema: { name, schema } },
      });
      check(r.choices[0].finish_reason === 'stop', `${name} seed ${seed}: ${r.choices[0].finish_reason}`);
      validates(schema, r.choices[0].message.content, `${name} seed ${seed}`);
    }
  }
});

await test('json_schema streamed == non-streamed (greedy)', async () => {
  const schema = SCHEMAS.person;
  const p = { model: 'default', messages: CHAT, temperature: 0, max_tokens: 400,
              response_format: { type: 'json_schema', json_schema: { name: 'person', schema } } };
  const full = await client.chat.completions.create(p);
  const stream = await client.chat.completions.create({ ...p, stream: true });
  let text = '', finish = null;
  for await (const chunk of stream)
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  check(text === full.choices[0].message.content, `stream ${JSON.stringify(text)} vs ${JSON.stringify(full.choices[0].message.content)}`);
  check(finish === 'stop', `finish ${finish}`);
  validates(schema, text, 'streamed person');
});

await test('response_format json_object: a JSON object', async () => {
  for (const temperature of [0, 1]) {
    const r = await client.chat.completions.create({
      model: 'default', messages: CHAT, temperature, seed: 3, max_tokens: 600,
      response_format: { type: 'json_object' },
    });
    const c = r.choices[0];
    if (c.finish_reason === 'length') continue;  // free-form strings may run long; nothing to parse
    const v = JSON.parse(c.message.content);
    check(v !== null && typeof v === 'object' && !Array.isArray(v), `not an object: ${c.message.content}`);
    if (temperature === 0) outputs.json_object = c.message.content;
  }
});

await test('completions with response_format and n = 3', async () => {
  const schema = SCHEMAS.enums_and_arrays;
  const r = await client.completions.create({
    model: 'default', prompt: 'The estate and the daughters:', n: 3, temperature: 0.8, seed: 11,
    max_tokens: 300, response_format: { type: 'json_schema', json_schema: { name: 'e', schema } },
  });
  check(r.choices.length === 3, 'three choices');
  for (const c of r.choices) validates(schema, c.text, `choice ${c.index}`);
});

await test('/generate: sampling_params.json_schema (a JSON string, as SGLang takes it)', async () => {
  const schema = SCHEMAS.any_of;
  for (const temperature of [0, 0.9]) {
    const { status, body } = await post('/generate', {
      text: 'Mr. Darcy said:',
      sampling_params: { max_new_tokens: 64, temperature, json_schema: JSON.stringify(schema) },
    });
    check(status === 200, `status ${status}: ${JSON.stringify(body)}`);
    validates(schema, body.text, `any_of at temperature ${temperature}`);
    if (temperature === 0) outputs.generate_json_schema = body.text;
  }
});

await test('/generate: regex, greedy and sampled, streamed and not', async () => {
  const regex = '(Yes|No), (Mr|Mrs|Miss) [A-Z][a-z]{2,9}\\. [0-9]{3} pounds\\.';
  const re = new RegExp(`^(?:${regex})$`);
  for (const temperature of [0, 1]) {
    const p = { text: 'Answer:', sampling_params: { max_new_tokens: 64, temperature, regex, sampling_seed: 5 } };
    const { status, body } = await post('/generate', p);
    check(status === 200, `status ${status}: ${JSON.stringify(body)}`);
    check(re.test(body.text), `${JSON.stringify(body.text)} does not match ${regex}`);
    check(body.meta_info.finish_reason.type === 'stop', `finish ${JSON.stringify(body.meta_info.finish_reason)}`);
    if (temperature === 0) outputs.generate_regex = body.text;
    const r = await fetch(`${base}/generate`, { method: 'POST', body: JSON.stringify({ ...p, stream: true }),
                                                headers: { 'Content-Type': 'application/json' } });
    const events = (await r.text()).split('\n\n').filter((e) => e.startsWith('data: {'));
    const last = JSON.parse(events.at(-1).slice(6));
    check(last.text === body.text, `streamed ${JSON.stringify(last.text)} vs ${JSON.stringify(body.text)}`);
  }
});

await test('/generate: ebnf', async () => {
  const ebnf = 'root ::= greeting ", " name "."\ngreeting ::= "Good morning" | "Good evening"\n' +
               'name ::= ("Mr. " | "Mrs. ") ("Darcy" | "Bennet" | "Bingley")';
  const { status, body } = await post('/generate', {
    text: 'He bowed and said:', sampling_params: { max_new_tokens: 32, temperature: 0, ebnf } });
  check(status === 200, `status ${status}: ${JSON.stringify(body)}`);
  check(/^Good (morning|evening), (Mr|Mrs)\. (Darcy|Bennet|Bingley)\.$/.test(body.text), `got ${JSON.stringify(body.text)}`);
  outputs.generate_ebnf = body.text;
});

await test('refused constraints: 400 naming the keyword or the field', async () => {
  const cases = [
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', patternProperties: { '^a': {} } } } } }, 'patternProperties'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x' } } }, 'json_schema.schema'],
    [{ response_format: { type: 'structural_tag' } }, 'response_format'],
    [{ response_format: { type: 'json_object' }, regex: 'a+' }, 'regex'],
    [{ regex: '(?<=a)b' }, 'regex'],
    [{ ebnf: 'root ::= undefined_rule' }, 'ebnf'],
  ];
  for (const [extra, needle] of cases) {
    const { status, body } = await post('/v1/chat/completions', { model: 'default', messages: CHAT, max_tokens: 8, ...extra });
    check(status === 400, `${JSON.stringify(extra)}: status ${status}`);
    check(JSON.stringify(body.error).includes(needle), `${JSON.stringify(extra)}: error ${JSON.stringify(body.error)} does not name ${needle}`);
  }
});

// Forced tool calls (the server runs --tool-call-parser glm47): the output is nothing but calls
// in GLM-4.7's format, which come back as message.tool_calls with arguments valid for each
// function's schema.
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather in a town',
    parameters: { type: 'object', properties: { town: { type: 'string', maxLength: 20 },
                                                days: { type: 'integer', minimum: 1, maximum: 7 } },
                  required: ['town', 'days'] } } },
  { type: 'function', function: { name: 'send_letter', description: 'Send a letter',
    parameters: { type: 'object', properties: { to: { enum: ['Darcy', 'Bingley', 'Wickham'] },
                                                sealed: { type: 'boolean' },
                                                lines: { type: 'array', items: { type: 'string', maxLength: 30 }, maxItems: 2 } },
                  required: ['to'] } } },
];
const TOOL_CHAT = [{ role: 'user', content: 'Is it raining at Pemberley? Write to Mr. Darcy.' }];
function validCalls(calls, allowed, what) {
  check(Array.isArray(calls) && calls.length >= 1, `${what}: no tool_calls`);
  for (const c of calls) {
    check(c.type === 'function' && /^call_/.test(c.id), `${what}: call shape ${JSON.stringify(c)}`);
    const tool = TOOLS.find((t) => t.function.name === c.function.name);
    check(tool && allowed.includes(c.function.name), `${what}: unexpected function ${c.function.name}`);
    validates(tool.function.parameters, c.function.arguments, `${what}: ${c.function.name} arguments`);
  }
}

await test('tool_choice "required": calls only, each valid for its schema (greedy and sampled)', async () => {
  for (const temperature of [0, 1]) {
    for (let seed = 0; seed < (temperature ? 6 : 1); seed++) {
      const r = await client.chat.completions.create({
        model: 'default', messages: TOOL_CHAT, tools: TOOLS, tool_choice: 'required',
        temperature, seed, max_tokens: 300 });
      const c = r.choices[0];
      check(c.finish_reason === 'tool_calls', `finish_reason ${c.finish_reason}`);
      validCalls(c.message.tool_calls, ['get_weather', 'send_letter'], `t=${temperature} seed ${seed}`);
      check(!c.message.content, `content ${JSON.stringify(c.message.content)}`);
      if (temperature === 0) outputs.tool_required = c.message.tool_calls.map((t) => [t.function.name, t.function.arguments]);
    }
  }
});

await test('tool_choice naming a function, parallel_tool_calls false: exactly that call', async () => {
  for (const name of ['get_weather', 'send_letter']) {
    const r = await client.chat.completions.create({
      model: 'default', messages: TOOL_CHAT, tools: TOOLS, parallel_tool_calls: false,
      tool_choice: { type: 'function', function: { name } }, temperature: 0, max_tokens: 300 });
    const calls = r.choices[0].message.tool_calls;
    check(calls?.length === 1, `${name}: ${calls?.length} calls`);
    validCalls(calls, [name], name);
    outputs[`tool_${name}`] = calls[0].function.arguments;
  }
});

await test('forced tool call streamed == non-streamed, then a tool result and an answer', async () => {
  const p = { model: 'default', messages: TOOL_CHAT, tools: TOOLS, temperature: 0, max_tokens: 300,
              tool_choice: { type: 'function', function: { name: 'get_weather' } } };
  const full = await client.chat.completions.create(p);
  const stream = await client.chat.completions.create({ ...p, stream: true });
  const calls = [];
  let finish = null;
  for await (const chunk of stream)
    for (const c of chunk.choices) {
      for (const d of c.delta.tool_calls ?? []) {
        calls[d.index] ??= { id: d.id, name: d.function?.name, arguments: '' };
        calls[d.index].arguments += d.function?.arguments ?? '';
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
  const want = full.choices[0].message.tool_calls;
  check(finish === 'tool_calls', `stream finish ${finish}`);
  check(calls.length === want.length && calls.every((c, i) => c.name === want[i].function.name &&
        JSON.stringify(JSON.parse(c.arguments)) === JSON.stringify(JSON.parse(want[i].function.arguments))),
        `streamed ${JSON.stringify(calls)} vs ${JSON.stringify(want)}`);
  const second = await client.chat.completions.create({
    model: 'default', tools: TOOLS, temperature: 0, max_tokens: 24,
    messages: [...TOOL_CHAT, full.choices[0].message,
               { role: 'tool', tool_call_id: want[0].id, content: '{"rain": true}' }] });
  check(second.choices[0].message.content?.length > 0, 'an answer after the tool result');
});

await test('tool_choice "required" refusals', async () => {
  const both = await post('/v1/chat/completions', { model: 'default', messages: TOOL_CHAT, tools: TOOLS,
    tool_choice: 'required', response_format: { type: 'json_object' } });
  check(both.status === 400 && both.body.error.param === 'tool_choice', `with response_format: ${both.status}`);
  const bad = await post('/v1/chat/completions', { model: 'default', messages: TOOL_CHAT, tool_choice: 'required',
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { x: { type: 'string', format: 'hostname' } } } } }] });
  check(bad.status === 400 && JSON.stringify(bad.body).includes('format'), `unsupported schema: ${bad.status} ${JSON.stringify(bad.body)}`);
});

if (outputsFile) writeFileSync(outputsFile, JSON.stringify(outputs, null, 1));
if (failures) {
  console.log(`${failures} structured-output check(s) failed`);
  process.exit(1);
}
