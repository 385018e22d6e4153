// A loopback reverse proxy between a coding agent and `flashkv serve` that records every
// exchange (request headers and body, response status, the x-flashkv-cache header and the
// whole response body, SSE included), so a test can check what the real client sent and
// what it got back. The upstream can change (a restarted server listens on a new port)
// while the agent keeps the proxy's address.
import http from 'node:http';
import { once } from 'node:events';

export class Recorder {
  constructor() {
    this.upstream = null; // "http://127.0.0.1:PORT" of the current flashkv serve
    this.exchanges = [];
    this.server = http.createServer((req, res) => this.#forward(req, res));
  }

  async listen() {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this.url;
  }

  async close() {
    this.server.closeAllConnections?.();
    this.server.close();
    await once(this.server, 'close').catch(() => {});
  }

  // Exchanges recorded since `mark` (an index into this.exchanges).
  since(mark) {
    return this.exchanges.slice(mark);
  }

  #forward(req, res) {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const ex = {
        method: req.method,
        path: req.url,
        headers: req.headers,
        body: body.toString('utf8'),
        json: null,
        status: 0,
        cache: null,
        response: '',
        error: null,
      };
      try {
        ex.json = body.length ? JSON.parse(ex.body) : null;
      } catch {
        ex.json = null;
      }
      this.exchanges.push(ex);
      if (!this.upstream) {
        ex.status = 502;
        ex.error = 'no upstream server';
        res.writeHead(502, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: ex.error } }));
        return;
      }
      const target = new URL(req.url, this.upstream);
      const headers = { ...req.headers, host: target.host };
      // Bodies are recorded as text, so none comes back compressed.
      delete headers['accept-encoding'];
      const up = http.request(target, { method: req.method, headers }, (ur) => {
        ex.status = ur.statusCode;
        ex.cache = ur.headers['x-flashkv-cache'] ?? null;
        res.writeHead(ur.statusCode, ur.headers);
        const out = [];
        ur.on('data', (c) => {
          out.push(c);
          res.write(c);
        });
        ur.on('end', () => {
          ex.response = Buffer.concat(out).toString('utf8');
          res.end();
        });
        ur.on('error', (e) => {
          ex.error = String(e);
          res.destroy();
        });
      });
      up.on('error', (e) => {
        ex.status = 502;
        ex.error = String(e);
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: ex.error } }));
      });
      up.end(body);
    });
  }
}

// The x-flashkv-cache header as an object: {source, reused, prompt, restore_ms, match}.
export function parseCacheHeader(value) {
  if (!value) return null;
  const [source, ...fields] = value.split(';').map((s) => s.trim());
  const out = { source };
  for (const f of fields) {
    const [k, v] = f.split('=');
    out[k] = k === 'match' ? v : Number(v);
  }
  return out;
}

// The data payloads of an SSE body, parsed (comments and [DONE] skipped).
export function sseData(text) {
  const out = [];
  for (const block of text.split('\n\n')) {
    for (const line of block.split('\n')) {
      if (!line.startsWith('data: ')) continue;
      const data = line.slice(6);
      if (data === '[DONE]') continue;
      try {
        out.push(JSON.parse(data));
      } catch {
        // not JSON: not a usage carrier
      }
    }
  }
  return out;
}

// The usage a response reported, normalised to {prompt, cached}: OpenAI chat
// (prompt_tokens, prompt_tokens_details.cached_tokens), Responses (input_tokens,
// input_tokens_details.cached_tokens) and Anthropic (input + cache creation + cache read,
// cache read), streamed or not; the last usage seen wins. Also the raw usage object.
export function reportedUsage(ex) {
  const isSse = ex.response.startsWith('event:') || ex.response.startsWith('data:') ||
                ex.response.startsWith(':');
  let objects = [];
  if (isSse) {
    objects = sseData(ex.response);
  } else {
    try {
      objects = [JSON.parse(ex.response)];
    } catch {
      objects = [];
    }
  }
  let usage = null;
  for (const o of objects) {
    const u = o.usage ?? o.response?.usage ?? o.message?.usage;
    if (u) usage = mergeUsage(usage, u);
  }
  if (!usage) return null;
  if ('prompt_tokens' in usage) {
    return { prompt: usage.prompt_tokens, cached: usage.prompt_tokens_details?.cached_tokens ?? 0,
             raw: usage };
  }
  if ('cache_read_input_tokens' in usage) {
    const read = usage.cache_read_input_tokens ?? 0;
    return { prompt: (usage.input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0) + read,
             cached: read, raw: usage };
  }
  if ('input_tokens' in usage) {
    return { prompt: usage.input_tokens, cached: usage.input_tokens_details?.cached_tokens ?? 0,
             raw: usage };
  }
  return null;
}

// Anthropic's message_delta usage updates the message_start one field by field.
function mergeUsage(prev, next) {
  return prev ? { ...prev, ...next } : { ...next };
}
