// The HTTP(S) proxy the agents are pointed at (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY): it
// refuses every request and records where the client wanted to go, so a test can fail
// when an agent tries to leave the machine (telemetry, update checks, plugin stores,
// model lists). Nothing is forwarded.
import net from 'node:net';
import { once } from 'node:events';

export class EgressTrap {
  constructor() {
    this.attempts = []; // {target, line}
    this.server = net.createServer((sock) => this.#handle(sock));
  }

  async listen() {
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.url = `http://127.0.0.1:${this.server.address().port}`;
    return this.url;
  }

  async close() {
    this.server.close();
    await once(this.server, 'close').catch(() => {});
  }

  #handle(sock) {
    let head = '';
    let recorded = false;
    const record = (line) => {
      if (recorded) return;
      recorded = true;
      // "CONNECT host:443 HTTP/1.1" or "GET http://host/path HTTP/1.1"; else raw bytes.
      const parts = line.split(' ');
      let target = line;
      if (parts.length >= 2) {
        try {
          target = parts[0] === 'CONNECT' ? parts[1] : new URL(parts[1]).host;
        } catch {
          target = parts[1];
        }
      }
      this.attempts.push({ target, line });
    };
    sock.on('data', (d) => {
      head += d.toString('latin1');
      const eol = head.indexOf('\r\n');
      if (eol < 0 && head.length < 4096) return;
      record(eol < 0 ? head.slice(0, 200) : head.slice(0, eol));
      sock.end('HTTP/1.1 403 Forbidden\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    });
    sock.on('end', () => {
      if (!recorded && head) record(head.slice(0, 200));
    });
    sock.on('error', () => {});
    // A client that connects and sends nothing still counts.
    setTimeout(() => {
      if (!recorded) record('(connection without a request line)');
      sock.destroy();
    }, 5000).unref();
  }
}
