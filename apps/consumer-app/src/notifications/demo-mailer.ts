import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { Pool } from 'pg';
import { consumerAppConfig } from '../consumer-app.config';

/** The fake gateway is down: worth trying again later. */
export class MailerUnavailableError extends Error {
  constructor(userId: number) {
    super(`mail gateway unavailable (user ${userId})`);
    this.name = 'MailerUnavailableError';
  }
}

/**
 * The demo's fake mail gateway, a downstream outside the consumer's transaction: it fails while an outage in
 * `demo_mailer_outages` lasts (for every user, or every n-th user id), and for good for addresses at
 * `bounce.invalid`. Like a real gateway, it deduplicates by the idempotency key its caller gives: it sends once
 * per key, and keeps a record of every call in `demo_mailer_calls` (calls, failed calls, when it sent), all
 * through a pool of its own (another system: a rollback of the caller's unit of work does not undo it, and it
 * never waits for a connection of the consumer's pool).
 */
@Injectable()
export class DemoMailer implements OnModuleDestroy {
  private readonly gateway = new Pool({ connectionString: consumerAppConfig().databaseUrl, max: 2 }).on('error', () => {
    // An idle connection that failed (PostgreSQL restarted or ended it): the pool drops it, and a call opens another.
  });

  async onModuleDestroy(): Promise<void> {
    await this.gateway.end();
  }

  async send(mail: { userId: number; email: string; idempotencyKey: string }): Promise<void> {
    const {
      rows: [state],
    } = await this.gateway.query(
      `SELECT (SELECT sent_at FROM demo_mailer_calls WHERE idempotency_key = $1) AS sent_at,
              EXISTS (SELECT 1 FROM demo_mailer_outages WHERE down_until > now() AND $2::int % every_nth_user = 0) AS down`,
      [mail.idempotencyKey, mail.userId],
    );
    // A key it sent already: the same answer as then, nothing sent again.
    const failure = state.sent_at ? undefined : mail.email.endsWith('@bounce.invalid') ? new Error(`mailbox ${mail.email} does not answer`) : state.down ? new MailerUnavailableError(mail.userId) : undefined;
    await this.gateway.query(
      `INSERT INTO demo_mailer_calls AS c (idempotency_key, user_id, email, calls, failed, sent_at) VALUES ($1, $2, $3, 1, $4, CASE WHEN $4 = 0 THEN now() END)
       ON CONFLICT (idempotency_key) DO UPDATE SET calls = c.calls + 1, failed = c.failed + EXCLUDED.failed, sent_at = coalesce(c.sent_at, EXCLUDED.sent_at)`,
      [mail.idempotencyKey, mail.userId, mail.email, failure ? 1 : 0],
    );
    if (failure) throw failure;
  }
}
