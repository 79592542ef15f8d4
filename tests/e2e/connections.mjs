// Hostile connections against a running `tandem serve` (issue #21 item 3). Plain TCP sockets,
// no dependencies.
//
//   node connections.mjs hostile URL IDLE SLOW HEADER_S BODY_S IDLE_S
//     Opens IDLE connections that send nothing and SLOW connections that drip one byte a second
//     (half in the headers, half in the body of a POST). While all of them are open, /health must
//     answer within 100 ms every time and a normal /v1/completions request must complete. Then the
//     drippers must be cut off by the header and body deadlines (HEADER_S, BODY_S seconds) and the
//     idle connections by the idle timeout (IDLE_S), each within a small margin.
//   node connections.mjs limit URL MAX
//     With MAX connections open (the server's --max-connections), one more gets a 503 JSON error
//     with Retry-After and Connection: close at once; once some close, requests are served again.
//   node connections.mjs rate URL PATH CONCURRENCY SECONDS
//     A measurement, not a check: GET PATH from CONCURRENCY keep-alive clients for SECONDS;
//     prints requests/s and latency percentiles.
//
// Prints one line per check and exits non-zero if any failed.
import net from 'node:net';

const [mode, base, ...args] = process.argv.slice(2);
if (!mode || !base) {
  console.error('usage: node connections.mjs hostile|limit URL ...');
  process.exit(2);
}
const { hostname: host, port } = new URL(base);

let failures = 0;
function check(cond, what) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}`);
  if (!cond) failures++;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now();

// A socket whose state is tracked: when it connected and closed, what it received.
function open() {
  const s = net.connect({ host, port: Number(port) });
  const c = { s, connected: false, closedAt: null, data: '', openedAt: now() };
  c.ready = new Promise((resolve) => {
    s.on('connect', () => {
      c.connected = true;
      resolve(true);
    });
    s.on('error', () => resolve(false));
  });
  s.setEncoding('latin1');
  s.on('data', (d) => (c.data += d));
  s.on('error', () => {});
  s.on('close', () => (c.closedAt = now()));
  return c;
}

// One request on a fresh connection (Connection: close); resolves with status, headers, body and
// the time to the whole response, or status 0 when the connection failed or timed out.
function request(method, path, body, timeoutMs = 30000) {
  return new Promise((resolve) => {
    const t0 = now();
    const c = open();
    const headers = [`${method} ${path} HTTP/1.1`, `Host: ${host}`, 'Connection: close'];
    if (body !== undefined)
      headers.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`);
    c.s.write(headers.join('\r\n') + '\r\n\r\n' + (body ?? ''));
    const timer = setTimeout(() => c.s.destroy(), timeoutMs);
    c.s.on('close', () => {
      clearTimeout(timer);
      const ms = now() - t0;
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(c.data);
      const end = c.data.indexOf('\r\n\r\n');
      resolve({
        status: m ? Number(m[1]) : 0,
        head: end < 0 ? c.data : c.data.slice(0, end),
        body: end < 0 ? '' : c.data.slice(end + 4),
        ms,
      });
    });
  });
}

const stillOpen = (list) => list.filter((c) => c.connected && c.closedAt === null).length;
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

async function openMany(n) {
  const list = [];
  // In batches, so the listen backlog never overflows while the server accepts.
  for (let i = 0; i < n; i += 100) {
    const batch = Array.from({ length: Math.min(100, n - i) }, open);
    await Promise.all(batch.map((c) => c.ready));
    list.push(...batch);
  }
  return list;
}

async function hostile() {
  const [nIdle, nSlow, headerS, bodyS, idleS] = args.map(Number);
  const t0 = now();
  const idle = await openMany(nIdle);
  // Slow senders: half drip their headers, half send the headers of a POST at once and drip its
  // body. One byte a second stays under any per-read timeout, so only a total deadline stops them.
  const slow = await openMany(nSlow);
  const headerDrip = slow.slice(0, nSlow / 2);
  const bodyDrip = slow.slice(nSlow / 2);
  for (const c of headerDrip) {
    c.pending = `GET /health HTTP/1.1\r\nHost: ${host}\r\nX-Slow: ${'a'.repeat(600)}\r\n\r\n`;
    c.startedAt = now();
  }
  for (const c of bodyDrip) {
    c.s.write(`POST /v1/completions HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\n` +
              'Content-Length: 1000\r\n\r\n');
    c.pending = '{' + ' '.repeat(998) + '}';
    c.startedAt = now();
  }
  const drip = setInterval(() => {
    for (const c of slow) {
      if (c.closedAt !== null || !c.pending) continue;
      c.s.write(c.pending[0]);
      c.pending = c.pending.slice(1);
    }
  }, 1000);
  drip.unref();
  console.log(`opened ${idle.length} idle and ${slow.length} slow connections in ` +
              `${(now() - t0).toFixed(0)} ms`);
  await sleep(300);  // let the server accept them all

  const openBefore = stillOpen(idle) + stillOpen(slow);
  const times = [];
  const statuses = [];
  for (let i = 0; i < 10; i++) {
    const r = await request('GET', '/health', undefined, 15000);
    if (r.ms > 100) console.log(`  /health took ${r.ms.toFixed(0)} ms (${r.status})`);
    times.push(r.ms);
    statuses.push(r.status);
    await sleep(50);
  }
  const openAfter = stillOpen(idle) + stillOpen(slow);
  console.log(`/health with ${openBefore} -> ${openAfter} connections open: ` +
              `${times.map((t) => t.toFixed(1)).join(' ')} ms`);
  check(openBefore === nIdle + nSlow && openAfter === nIdle + nSlow,
        `all ${nIdle + nSlow} idle and slow connections stayed open while /health was timed ` +
        `(${openBefore}, ${openAfter})`);
  check(statuses.every((s) => s === 200), `/health answered 200 (${statuses.join(' ')})`);
  check(Math.max(...times) < 100,
        `/health within 100 ms every time (median ${pct(times, 0.5).toFixed(1)} ms, max ` +
        `${Math.max(...times).toFixed(1)} ms)`);

  const gen = await request('POST', '/v1/completions',
                            JSON.stringify({ prompt: 'Hello', max_tokens: 8, temperature: 0 }), 60000);
  let text = null;
  try {
    text = JSON.parse(gen.body.includes('\r\n') ? dechunk(gen.body) : gen.body).choices[0].text;
  } catch {}
  check(gen.status === 200 && typeof text === 'string',
        `a normal completion finished under the load (${gen.status}, ${gen.ms.toFixed(0)} ms)`);
  check(stillOpen(idle) === nIdle, `the idle connections were still open after it`);

  // The deadlines: every dripper is cut off within its deadline plus a margin; the idle ones after
  // the idle timeout (counted from when they connected).
  const margin = 2500;
  const waitUntil = async (cond, ms) => {
    const end = now() + ms;
    while (!cond() && now() < end) await sleep(100);
  };
  await waitUntil(() => stillOpen(slow) === 0, Math.max(headerS, bodyS) * 1000 + margin + 1000);
  clearInterval(drip);
  const cut = (list, s) => list.filter((c) => c.closedAt !== null &&
                                              c.closedAt - c.startedAt <= s * 1000 + margin &&
                                              c.closedAt - c.startedAt >= s * 1000 - margin).length;
  const lateness = (list) => list.map((c) => c.closedAt === null ? Infinity : (c.closedAt - c.startedAt) / 1000);
  const hd = lateness(headerDrip), bd = lateness(bodyDrip);
  check(cut(headerDrip, headerS) === headerDrip.length,
        `header drippers cut off after the header deadline of ${headerS} s ` +
        `(${cut(headerDrip, headerS)}/${headerDrip.length}, after ${Math.min(...hd).toFixed(1)}-` +
        `${Math.max(...hd).toFixed(1)} s)`);
  check(cut(bodyDrip, bodyS) === bodyDrip.length,
        `body drippers cut off after the body deadline of ${bodyS} s ` +
        `(${cut(bodyDrip, bodyS)}/${bodyDrip.length}, after ${Math.min(...bd).toFixed(1)}-` +
        `${Math.max(...bd).toFixed(1)} s)`);
  const got408 = slow.filter((c) => /^HTTP\/1\.1 408 /.test(c.data)).length;
  check(got408 === slow.length, `the drippers were told 408 before the close (${got408}/${slow.length})`);

  for (const c of idle) c.startedAt = c.openedAt;
  await waitUntil(() => stillOpen(idle) === 0, idleS * 1000 + margin + 1000);
  const id = lateness(idle);
  check(cut(idle, idleS) === idle.length,
        `idle connections closed after the idle timeout of ${idleS} s (${cut(idle, idleS)}/` +
        `${idle.length}, after ${Math.min(...id).toFixed(1)}-${Math.max(...id).toFixed(1)} s)`);
  for (const c of [...idle, ...slow]) c.s.destroy();
  const h = await request('GET', '/health');
  check(h.status === 200, `healthy afterwards (${h.status})`);
}

// Undoes chunked transfer encoding.
function dechunk(s) {
  let out = '';
  for (let i = 0; ;) {
    const eol = s.indexOf('\r\n', i);
    const n = parseInt(s.slice(i, eol), 16);
    if (!(n > 0)) return out;
    out += s.slice(eol + 2, eol + 2 + n);
    i = eol + 2 + n + 2;
  }
}

async function limit() {
  const [max] = args.map(Number);
  const held = await openMany(max);
  await sleep(300);
  check(stillOpen(held) === max, `${max} connections open (${stillOpen(held)})`);
  const r = await request('GET', '/health', undefined, 5000);
  let msg = '';
  try {
    msg = JSON.parse(r.body).error.message;
  } catch {}
  check(r.status === 503 && /retry-after: *\d+/i.test(r.head) && /connection: *close/i.test(r.head) &&
          /connections/i.test(msg),
        `connection ${max + 1} refused with a 503 JSON error, Retry-After and Connection: close ` +
        `in ${r.ms.toFixed(1)} ms (${r.status}: ${msg})`);
  check(r.ms < 1000, `the refusal came at once (${r.ms.toFixed(1)} ms)`);
  check(stillOpen(held) === max, 'the open connections were left alone');
  for (const c of held.slice(0, 10)) c.s.destroy();
  await sleep(300);
  const ok = await request('GET', '/health', undefined, 5000);
  check(ok.status === 200, `served again once connections closed (${ok.status})`);
  for (const c of held) c.s.destroy();
}

async function rate() {
  const [path, conc, seconds] = [args[0], Number(args[1]), Number(args[2])];
  const { default: http } = await import('node:http');
  const agent = new http.Agent({ keepAlive: true, maxSockets: conc });
  const get = () => new Promise((resolve) => {
    const t = now();
    http.get({ host, port, path, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode === 200 ? now() - t : -1));
    }).on('error', () => resolve(-1));
  });
  const lat = [];
  let errors = 0;
  const end = now() + seconds * 1000;
  const loop = async () => {
    while (now() < end) {
      const ms = await get();
      if (ms < 0) errors++;
      else lat.push(ms);
    }
  };
  const t0 = now();
  await Promise.all(Array.from({ length: conc }, loop));
  const s = (now() - t0) / 1000;
  console.log(`GET ${path} x${conc} for ${s.toFixed(1)} s: ${(lat.length / s).toFixed(0)} req/s, ` +
              `p50 ${pct(lat, 0.5).toFixed(2)} ms, p99 ${pct(lat, 0.99).toFixed(2)} ms, ` +
              `${errors} errors`);
  agent.destroy();
}

if (mode === 'hostile') await hostile();
else if (mode === 'rate') await rate();
else if (mode === 'limit') await limit();
else {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
process.exit(failures ? 1 : 0);
