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
}

const READS = new Set(['GET', 'HEAD']);

/**
 * Who may use the admin API and the console. With tokens: `Authorization: Bearer <token>`, compared in constant
 * time; the read-only token lets GET requests through and refuses every action (403). With the application's
 * guard: that guard decides, and an action must come as JSON from the same site (a cookie alone cannot act).
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
    const reading = READS.has((request.method ?? 'GET').toUpperCase());
    if (this.options.access.kind === 'guard') {
      if (!reading) refuseForgeable(request);
      const guard = await this.applicationGuard(this.options.access.guard);
      const answer = guard.canActivate(context);
      const allowed = isObservable(answer) ? await lastValueFrom(answer) : await answer;
      if (!allowed) throw new ForbiddenException("the application's guard refused this request");
      return true;
    }
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer (.+)$/.exec(header) : null;
    // Digests of equal length, so that neither the length nor the content of the token leaks through timing.
    const given = match ? digest(match[1]) : undefined;
    if (given && timingSafeEqual(given, this.expected!)) return true;
    if (given && this.readOnly && timingSafeEqual(given, this.readOnly)) {
      request.kafkaEoReadOnly = true;
      if (!reading) throw new ForbiddenException('this token may only read: releases, replays, discards and retries need the admin token');
      return true;
    }
    throw new UnauthorizedException('a valid admin token is required: Authorization: Bearer <token>');
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
 * answer) and not from another site, where the browser says so.
 */
function refuseForgeable(request: AdminRequest): void {
  const site = request.headers['sec-fetch-site'];
  if (site === 'cross-site') throw new ForbiddenException('an action from another site is refused');
  const type = request.headers['content-type'];
  if (typeof type !== 'string' || !/^application\/json\b/i.test(type)) {
    throw new ForbiddenException('an action must be sent as JSON (Content-Type: application/json)');
  }
}
