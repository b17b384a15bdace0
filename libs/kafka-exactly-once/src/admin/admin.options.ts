import { InvalidOptionsError } from '../errors/invalid-options.error';

export interface KafkaExactlyOnceAdminOptions {
  /**
   * The bearer token every request must carry (`Authorization: Bearer <token>`). Required, at least 16
   * characters: the module refuses to start without one.
   */
  token: string;
  /** How long a release or replay request waits for the consumer to carry it out before answering 202 (ms, default 30000). */
  waitMs?: number;
}

export interface ResolvedAdminOptions {
  token: string;
  waitMs: number;
}

export const ADMIN_OPTIONS = Symbol('kafka-eo:admin-options');

export function resolveAdminOptions(options: KafkaExactlyOnceAdminOptions | undefined): ResolvedAdminOptions {
  const token = options?.token;
  if (typeof token !== 'string' || token.trim() === '') {
    throw new InvalidOptionsError('token', 'is required: KafkaExactlyOnceAdminModule serves operator actions (release, replay, discard) and refuses to start without a bearer token; pass forRoot({ token: process.env.ADMIN_TOKEN })');
  }
  if (token.length < 16) throw new InvalidOptionsError('token', `is ${token.length} characters; use at least 16 (e.g. openssl rand -hex 24)`);
  const waitMs = options?.waitMs ?? 30000;
  if (!Number.isInteger(waitMs) || waitMs < 0 || waitMs > 600000) throw new InvalidOptionsError('waitMs', `must be an integer from 0 to 600000, got ${JSON.stringify(waitMs)}`);
  return { token, waitMs };
}
