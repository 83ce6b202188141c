import { createServer, IncomingMessage, Server } from 'node:http';
import { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** One scripted answer: a status, or a status with headers and maybe a body. */
type Answer = number | { status: number; headers: Record<string, string>; body?: string };

/** A real webhook receiver on 127.0.0.1: answers from a script, then 200. */
export class Receiver {
  readonly requests: { headers: IncomingMessage['headers']; body: string; status: number }[] = [];
  private script: Answer[];
  private server: Server;
  url = '';

  private constructor(script: Answer[]) {
    this.script = [...script];
    this.server = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const answer = this.script.shift() ?? 200;
        const { status, headers, body: answerBody } =
          typeof answer === 'number' ? { status: answer, headers: {}, body: undefined } : answer;
        this.requests.push({ headers: req.headers, body, status });
        res.writeHead(status, { 'content-type': 'text/plain', ...headers });
        res.end(answerBody ?? (status < 300 ? 'thanks' : 'receiver is down'));
      });
    });
  }

  static async start(script: Answer[] = []): Promise<Receiver> {
    const r = new Receiver(script);
    await new Promise<void>((ok) => r.server.listen(0, '127.0.0.1', ok));
    r.url = `http://127.0.0.1:${(r.server.address() as AddressInfo).port}/hooks`;
    return r;
  }

  async stop() {
    const closed = new Promise((ok) => this.server.close(ok));
    // Dakghar keeps its connections open for the next delivery, and
    // close() alone waits for the client to let them go: the endpoint
    // test hung here for its whole 60 s now and then.
    this.server.closeAllConnections();
    await closed;
  }
}

const port = Number(process.env.E2E_PORT ?? 3999);
const base = `http://127.0.0.1:${port}`;

/** The REST API with the key `serve.sh` created for the E2E account. */
export async function api(method: string, path: string, body?: unknown): Promise<any> {
  const key = readFileSync(join(process.env.TMPDIR ?? tmpdir(), `dakghar-e2e-${port}`, 'api-key'), 'utf8').trim();
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** Posts `text` as it is: JSON.stringify could not keep a duplicate key or a 23-digit number. */
export async function apiRaw(method: string, path: string, text: string): Promise<any> {
  const key = readFileSync(join(process.env.TMPDIR ?? tmpdir(), `dakghar-e2e-${port}`, 'api-key'), 'utf8').trim();
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: text,
  });
  const answer = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${answer}`);
  return answer ? JSON.parse(answer) : null;
}

/** A unique id per test run and project, so the two projects do not meet. */
export function uniqueId(prefix: string, project: string): string {
  return `${prefix}_${project.replace(/\W/g, '')}_${Date.now().toString(36)}`;
}

/** The REST API with the platform key `serve.sh` created. */
export async function platform(method: string, path: string, body?: unknown): Promise<any> {
  const key = readFileSync(join(process.env.TMPDIR ?? tmpdir(), `dakghar-e2e-${port}`, 'platform-key'), 'utf8').trim();
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** The newest link to `path` mailed to `to` (waits for the mailer). */
export async function mailedLink(to: string, path: string): Promise<string> {
  const file = join(process.env.TMPDIR ?? tmpdir(), `dakghar-e2e-${port}`, 'mail.jsonl');
  const deadline = Date.now() + 20_000;
  for (;;) {
    const mails = readFileSync(file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { to: string[]; data: string })
      .filter((m) => m.to.includes(to));
    const last = mails.pop();
    const link = unquote(last?.data ?? '').match(new RegExp(`https?://[^\\s]*${path}[^\\s]*`))?.[0];
    if (link) return new URL(link).pathname;
    if (Date.now() > deadline) throw new Error(`no mail to ${to} with ${path}`);
    await new Promise((ok) => setTimeout(ok, 200));
  }
}

/** A mail body as its author wrote it: lettre sends text as
 * quoted-printable, which folds long lines (links) with `=` breaks. */
function unquote(body: string): string {
  return body
    .replace(/=\r?\n/g, '')
    .replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

/** The port Dakghar lets frame portal sessions (serve.sh's --embed-origins). */
export const embedPort = port + 1;
