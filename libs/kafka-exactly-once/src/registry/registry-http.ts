import { Agent as HttpAgent, request as httpRequest } from 'http';
import { Agent as HttpsAgent, request as httpsRequest } from 'https';
import type { ResolvedOptions } from '../options/resolved-options';

/** The module's `schemaRegistry` option, resolved. */
export type RegistryOptions = NonNullable<ResolvedOptions['schemaRegistry']>;

/** An answer of the registry's REST API: its HTTP status and its body (parsed JSON, or the text when it is not JSON). */
export interface RegistryAnswer {
  status: number;
  body: unknown;
}

/**
 * The registry's REST API as the library calls it: one request, resolved with any HTTP status the server gave
 * (telling the registry's own answers from a proxy's is the caller's), rejected only when no answer came.
 */
export interface RegistryTransport {
  request(method: 'GET' | 'POST', path: string, body?: unknown): Promise<RegistryAnswer>;
}

/**
 * The registry's own error code of an answer: Confluent's five-digit `error_code` (40401: no such subject; 40402: no
 * such version; 40403: no such schema). Undefined for an answer that is not a registry's (a proxy's page, or a
 * server's "no such path", which some put in `error_code` as the bare HTTP status).
 */
export function errorCodeOf(answer: RegistryAnswer): number | undefined {
  const code = (answer.body as { error_code?: unknown } | null)?.error_code;
  return typeof code === 'number' && Number.isInteger(code) && code >= 10000 && code <= 99999 ? code : undefined;
}

/** The largest answer read (a schema with its references is kilobytes; anything near this is not a registry). */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

const CONTENT_TYPE = 'application/vnd.schemaregistry.v1+json';

/**
 * HTTP(S) to a Confluent-compatible registry with Node's own client: basic or bearer authentication, Node's TLS
 * options for an https URL, kept-alive connections, each request ended after `requestTimeoutMs`.
 */
export function httpTransport(options: RegistryOptions): RegistryTransport {
  const base = new URL(options.url);
  const secure = base.protocol === 'https:';
  const agent = secure ? new HttpsAgent({ keepAlive: true, ...(options.tls ?? {}) }) : new HttpAgent({ keepAlive: true });
  const auth = options.auth;
  const basic = auth && 'username' in auth ? `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}` : undefined;
  const bearer = auth && 'bearerToken' in auth ? auth.bearerToken : undefined;
  const prefix = base.pathname.replace(/\/+$/, '');
  return {
    async request(method, path, body) {
      const authorization = basic ?? (bearer === undefined ? undefined : `Bearer ${typeof bearer === 'function' ? await bearer() : bearer}`);
      const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body), 'utf8');
      return new Promise<RegistryAnswer>((resolve, reject) => {
        const send = secure ? httpsRequest : httpRequest;
        const req = send(
          {
            protocol: base.protocol,
            hostname: base.hostname,
            port: base.port || undefined,
            path: `${prefix}${path}`,
            method,
            agent,
            headers: {
              accept: `${CONTENT_TYPE}, application/json`,
              'user-agent': 'kafka-exactly-once',
              ...(payload ? { 'content-type': CONTENT_TYPE, 'content-length': String(payload.length) } : {}),
              ...(authorization ? { authorization } : {}),
            },
          },
          (res) => {
            const chunks: Buffer[] = [];
            let length = 0;
            res.on('data', (chunk: Buffer) => {
              length += chunk.length;
              if (length > MAX_ANSWER_BYTES) {
                req.destroy(new Error(`the answer to ${method} ${path} is larger than ${MAX_ANSWER_BYTES} bytes`));
                return;
              }
              chunks.push(chunk);
            });
            res.on('end', () => {
              const text = Buffer.concat(chunks).toString('utf8');
              let parsed: unknown = text;
              try {
                parsed = text === '' ? null : JSON.parse(text);
              } catch {
                // not JSON: kept as text (an HTML error page of a proxy, say)
              }
              resolve({ status: res.statusCode ?? 0, body: parsed });
            });
            res.on('error', reject);
          },
        );
        req.setTimeout(options.requestTimeoutMs, () => req.destroy(new Error(`no answer within ${options.requestTimeoutMs} ms`)));
        req.on('error', reject);
        req.end(payload);
      });
    },
  };
}
