import type { CanActivate, Type } from '@nestjs/common';
import { InvalidOptionsError } from '../errors/invalid-options.error';

/** The operator console's settings (`console: true` takes the defaults). */
export interface KafkaExactlyOnceConsoleOptions {
  /** Where the page is served (default `/kafka-eo`: the page at `/kafka-eo/`, beside the admin REST routes). */
  path?: string;
  /** How often the overview refreshes itself (ms, default 5000; 1000 to 600000). */
  refreshMs?: number;
}

/** Who the admin REST API and the console let in. */
export interface KafkaExactlyOnceAdminOptions {
  /**
   * The bearer token every request must carry (`Authorization: Bearer <token>`), at least 16 characters.
   * Required unless `guard` is given: the module refuses to start without one or the other.
   */
  token?: string;
  /**
   * A second token, at least 16 characters, that may only read: with it every GET answers, every action (release,
   * replay, discard, divert, outbox retry and discard) is refused with 403.
   */
  readOnlyToken?: string;
  /**
   * The application's own Nest guard instead of the tokens (a session, an SSO, a role check): it decides every
   * request of the admin API and of the console. A class is taken from the application's providers when it is
   * one (with its dependencies), else instantiated; an instance is used as it is. Needs `actorOf`. Actions then
   * need a JSON body and are refused from anywhere but the application's own origin (`Sec-Fetch-Site` other than
   * `same-origin`, or an `Origin` of another host), so that a cookie alone cannot make a request act.
   */
  guard?: Type<CanActivate> | CanActivate;
  /**
   * How the token that acts is named in the audit (`token:<tokenName>`, default `admin`): e.g. the team or the
   * tool the token was given to. Letters, digits, `.`, `_`, `-`, `@`, at most 64.
   */
  tokenName?: string;
  /**
   * Who acts, from the request as your authentication left it (e.g. `(req) => req.user?.email`): recorded as the
   * audit's `actor` of every action. Required with `guard`. When it is given, an action it names no one for is
   * refused (403). With tokens too, the audit records the name and the token that acted: `alice (token:admin)`.
   * Without it (tokens only), the actor is the token that acted (`token:<tokenName>`). The name a caller gives in
   * the body (`actor`) is kept apart, as `declaredActor`: a label, never the identity.
   */
  actorOf?: (request: any) => string | undefined;
  /**
   * The operator console, a web page of this application (docs/console.md): `true` serves it at `/kafka-eo/`,
   * a string at that path, or the options. Off by default.
   */
  console?: boolean | string | KafkaExactlyOnceConsoleOptions;
  /** How long a release or replay request waits for the consumer to carry it out before answering 202 (ms, default 30000). */
  waitMs?: number;
}

export interface ResolvedConsoleOptions {
  /** Without slashes at either end (`kafka-eo`, `ops/kafka`). */
  path: string;
  refreshMs: number;
}

export interface ResolvedAdminOptions {
  /** `token`: the bearer tokens; `guard`: the application's guard. */
  access: { kind: 'token'; token: string; readOnlyToken?: string; tokenName: string } | { kind: 'guard'; guard: Type<CanActivate> | CanActivate };
  actorOf?: (request: any) => string | undefined;
  console?: ResolvedConsoleOptions;
  waitMs: number;
}

export const ADMIN_OPTIONS = Symbol('kafka-eo:admin-options');

/** The path the admin REST routes live under. */
export const ADMIN_API_PATH = 'kafka-eo';

function checkToken(field: string, token: unknown): string {
  if (typeof token !== 'string' || token.trim() === '') throw new InvalidOptionsError(field, 'must be a non-empty string');
  if (token.length < 16) throw new InvalidOptionsError(field, `is ${token.length} characters; use at least 16 (e.g. openssl rand -hex 24)`);
  return token;
}

function resolveConsole(value: KafkaExactlyOnceAdminOptions['console']): ResolvedConsoleOptions | undefined {
  if (value === undefined || value === false) return undefined;
  const options: KafkaExactlyOnceConsoleOptions = value === true ? {} : typeof value === 'string' ? { path: value } : value;
  if (typeof options !== 'object' || options === null) throw new InvalidOptionsError('console', `must be true, a path or { path, refreshMs }, got ${JSON.stringify(value)}`);
  const raw = options.path ?? `/${ADMIN_API_PATH}`;
  // Plain path segments only: the path is written into the page and its Content-Security-Policy.
  if (typeof raw !== 'string' || !/^\/?[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*\/?$/.test(raw) || /(^|\/)\.\.?(\/|$)/.test(raw)) {
    throw new InvalidOptionsError('console.path', `must be a path of letters, digits, ".", "_", "~" and "-" segments (e.g. "/kafka-eo" or "/ops/kafka"), got ${JSON.stringify(raw)}`);
  }
  const path = raw.replace(/^\/|\/$/g, '');
  const refreshMs = options.refreshMs ?? 5000;
  if (!Number.isInteger(refreshMs) || refreshMs < 1000 || refreshMs > 600000) throw new InvalidOptionsError('console.refreshMs', `must be an integer from 1000 to 600000, got ${JSON.stringify(refreshMs)}`);
  return { path, refreshMs };
}

export function resolveAdminOptions(options: KafkaExactlyOnceAdminOptions | undefined): ResolvedAdminOptions {
  const waitMs = options?.waitMs ?? 30000;
  if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > 600000) throw new InvalidOptionsError('waitMs', `must be an integer from 0 to 600000, got ${JSON.stringify(waitMs)}`);
  if (options?.actorOf !== undefined && typeof options.actorOf !== 'function') throw new InvalidOptionsError('actorOf', 'must be a function of the request');
  const common = { waitMs, actorOf: options?.actorOf, console: resolveConsole(options?.console) };
  if (options?.guard !== undefined) {
    const guard = options.guard;
    const usable = typeof guard === 'function' || (typeof guard === 'object' && guard !== null && typeof (guard as CanActivate).canActivate === 'function');
    if (!usable) throw new InvalidOptionsError('guard', 'must be a Nest guard: a class implementing CanActivate, or an instance of one');
    if (options.token !== undefined || options.readOnlyToken !== undefined || options.tokenName !== undefined) {
      throw new InvalidOptionsError('guard', 'replaces the tokens: give either guard or token (and readOnlyToken, tokenName), not both');
    }
    // The audit is where a team finds out who released a key: under a guard only the application knows who that is.
    if (options.actorOf === undefined) {
      throw new InvalidOptionsError('actorOf', "is required with guard: the audit records who acted, as your authentication names them; pass actorOf: (request) => request.user?.email (whatever your guard sets on the request)");
    }
    return { ...common, access: { kind: 'guard', guard } };
  }
  const token = options?.token;
  if (typeof token !== 'string' || token.trim() === '') {
    throw new InvalidOptionsError('token', 'is required: KafkaExactlyOnceAdminModule serves operator actions (release, replay, discard) and refuses to start without a bearer token or a guard; pass forRoot({ token: process.env.ADMIN_TOKEN })');
  }
  checkToken('token', token);
  const readOnlyToken = options?.readOnlyToken === undefined ? undefined : checkToken('readOnlyToken', options.readOnlyToken);
  if (readOnlyToken === token) throw new InvalidOptionsError('readOnlyToken', 'must differ from token');
  const tokenName = options?.tokenName ?? 'admin';
  if (typeof tokenName !== 'string' || !/^[A-Za-z0-9._@-]{1,64}$/.test(tokenName)) {
    throw new InvalidOptionsError('tokenName', `must be 1 to 64 letters, digits, ".", "_", "-" or "@" (the audit records token:<tokenName>), got ${JSON.stringify(tokenName)}`);
  }
  return { ...common, access: { kind: 'token', token, tokenName, ...(readOnlyToken ? { readOnlyToken } : {}) } };
}
