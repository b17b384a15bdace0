import { CanActivate, ExecutionContext, ForbiddenException, Inject, Injectable, UnauthorizedException, type Type } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { createHash, timingSafeEqual } from 'crypto';
import { isObservable, lastValueFrom } from 'rxjs';
import { ADMIN_OPTIONS, type ResolvedAdminOptions } from './admin.options';

const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/** A request as the guard reads it (Express's or Fastify's). */
interface AdminRequest {
  method?: string;
  headers: Record<string, string | string[] | undefined>;
  /** Set by this guard: the request may only read. */
  kafkaEoReadOnly?: boolean;
  /** Set by this guard on an action: who acts, as the authentication names them (the audit's `actor`). */
  kafkaEoActor?: string;
}

/** Express's response or Fastify's reply: both have `header(name, value)`. */
interface AdminResponse {
  header?(name: string, value: string): unknown;
  setHeader?(name: string, value: string): unknown;
}

/**
 * Headers of every admin API response, refusals included: the documents hold record data that no browser may
 * sniff into another type, and that no cache (the browser's or a proxy's) may keep.
 */
export const ADMIN_RESPONSE_HEADERS: ReadonlyArray<[string, string]> = [
  ['X-Content-Type-Options', 'nosniff'],
  ['Cache-Control', 'no-store'],
];

/** Who acts, as `request.kafkaEoActor` holds it (set by AdminAccessGuard on every action it lets through). */
export function authenticatedActor(request: unknown): string {
  const actor = (request as AdminRequest | undefined)?.kafkaEoActor;
  if (typeof actor !== 'string' || actor === '') throw new ForbiddenException('no authenticated actor for this action');
  return actor;
}

const READS = new Set(['GET', 'HEAD']);

/**
 * Who may use the admin API and the console, and who acts. With tokens: `Authorization: Bearer <token>`, compared
 * in constant time; the read-only token lets GET requests through and refuses every action (403). With the
 * application's guard: that guard decides, and an action must come as JSON from the application's own origin (a
 * cookie alone cannot act). An action is recorded with the actor the authentication names: the application's
 * `actorOf` (refused when it names no one; with a token, followed by the token: `alice (token:admin)`), else the
 * token that acted (`token:<tokenName>`).
 */
@Injectable()
export class AdminAccessGuard implements CanActivate {
  private readonly expected?: Buffer;
  private readonly readOnly?: Buffer;
  private delegate?: CanActivate;

  constructor(
    @Inject(ADMIN_OPTIONS) private readonly options: ResolvedAdminOptions,
    private readonly moduleRef: ModuleRef,
  ) {
    if (options.access.kind === 'token') {
      this.expected = digest(options.access.token);
      if (options.access.readOnlyToken) this.readOnly = digest(options.access.readOnlyToken);
    }
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<AdminRequest>();
    const response = context.switchToHttp().getResponse<AdminResponse>();
    for (const [name, value] of ADMIN_RESPONSE_HEADERS) {
      if (typeof response?.header === 'function') response.header(name, value);
      else response?.setHeader?.(name, value);
    }
    const reading = READS.has((request.method ?? 'GET').toUpperCase());
    if (this.options.access.kind === 'guard') {
      if (!reading) refuseForgeable(request);
      const guard = await this.applicationGuard(this.options.access.guard);
      const answer = guard.canActivate(context);
      const allowed = isObservable(answer) ? await lastValueFrom(answer) : await answer;
      if (!allowed) throw new ForbiddenException("the application's guard refused this request");
      if (!reading) request.kafkaEoActor = this.actorOf(request, undefined);
      return true;
    }
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer (.+)$/.exec(header) : null;
    // Digests of equal length, so that neither the length nor the content of the token leaks through timing.
    const given = match ? digest(match[1]) : undefined;
    if (given && timingSafeEqual(given, this.expected!)) {
      if (!reading) request.kafkaEoActor = this.actorOf(request, `token:${this.options.access.tokenName}`);
      return true;
    }
    if (given && this.readOnly && timingSafeEqual(given, this.readOnly)) {
      request.kafkaEoReadOnly = true;
      if (!reading) throw new ForbiddenException('this token may only read: releases, replays, discards and retries need the admin token');
      return true;
    }
    throw new UnauthorizedException('a valid admin token is required: Authorization: Bearer <token>');
  }

  /**
   * Who acts: the name the application's `actorOf` gives (an action it names no one for is refused: the audit
   * must say who did it), else `byToken`, the token that acted. With both, the name and the token that acted:
   * `alice (token:admin)`, so that the audit still says which token a person used. Never the name the caller gives
   * of itself.
   */
  private actorOf(request: AdminRequest, byToken: string | undefined): string {
    const actorOf = this.options.actorOf;
    if (!actorOf) return byToken!;
    const named = actorOf(request);
    if (typeof named !== 'string' || named.trim() === '') {
      throw new ForbiddenException("the application's actorOf names no one for this request: an action is recorded with who did it, so it needs a signed-in user that actorOf names");
    }
    return byToken === undefined ? named.slice(0, 200) : `${named.slice(0, 200)} (${byToken})`;
  }

  /** The application's guard: its provider when it is one (with its dependencies), else a new instance. */
  private async applicationGuard(guard: Type<CanActivate> | CanActivate): Promise<CanActivate> {
    if (typeof guard !== 'function') return guard;
    if (this.delegate) return this.delegate;
    try {
      this.delegate = this.moduleRef.get(guard, { strict: false });
    } catch {
      this.delegate = await this.moduleRef.create(guard);
    }
    return this.delegate!;
  }
}

/**
 * An action under the application's guard (often a session cookie, which a browser sends whatever site asks):
 * only as JSON (a form of another site cannot send it without the CORS preflight the application does not
 * answer), and only from the application's own origin, where the browser says where it comes from: `Sec-Fetch-Site`
 * other than `same-origin` (`same-site` included: a sibling subdomain is another application) and an `Origin` whose
 * host is not the request's own are refused. A client that sends neither (curl, a script) is not a browser
 * carrying someone's cookie.
 */
function refuseForgeable(request: AdminRequest): void {
  const header = (name: string) => {
    const value = request.headers[name];
    return Array.isArray(value) ? value.join(',') : value;
  };
  const site = header('sec-fetch-site');
  if (site !== undefined && site !== 'same-origin' && site !== 'none') {
    throw new ForbiddenException(`an action from another site is refused (Sec-Fetch-Site: ${site.slice(0, 40)}): act from the console of this application`);
  }
  const origin = header('origin');
  if (origin !== undefined && !ownOrigin(origin, [header('host'), header('x-forwarded-host')])) {
    throw new ForbiddenException(`an action from another origin is refused (Origin: ${origin.slice(0, 200)} is not this application's): act from the console of this application`);
  }
  const type = header('content-type');
  if (typeof type !== 'string' || !/^application\/json\b/i.test(type)) {
    throw new ForbiddenException('an action must be sent as JSON (Content-Type: application/json)');
  }
}

/** Whether an `Origin` names the host the request was sent to (`null`, an opaque origin, never does). */
function ownOrigin(origin: string, hosts: Array<string | undefined>): boolean {
  let host: string;
  try {
    host = new URL(origin).host.toLowerCase();
  } catch {
    return false;
  }
  // X-Forwarded-Host (set by a proxy in front) cannot come from another site's page: it is not a header a page may
  // set without a CORS preflight, which the application does not answer.
  return hosts.some((h) => typeof h === 'string' && h.split(',')[0].trim().toLowerCase() === host);
}
