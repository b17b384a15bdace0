import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { Pool } from 'pg';
import type { EntityManager } from 'typeorm';
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
 * per key, in `demo_mailer_sent`, written through a pool of its own (another system: a rollback of the caller's
 * unit of work does not undo it, and it never waits for a connection of the consumer's pool), and counts the calls
 * that came again with a key it knew.
 */
@Injectable()
export class DemoMailer implements OnModuleDestroy {
  private readonly gateway = new Pool({ connectionString: consumerAppConfig().databaseUrl, max: 2 });

  async onModuleDestroy(): Promise<void> {
    await this.gateway.end();
  }

  async send(manager: EntityManager, mail: { userId: number; email: string; idempotencyKey: string }): Promise<void> {
    if (mail.email.endsWith('@bounce.invalid')) throw new Error(`mailbox ${mail.email} does not answer`);
    const [outage] = await manager.query(`SELECT 1 FROM demo_mailer_outages WHERE down_until > now() AND $1::int % every_nth_user = 0 LIMIT 1`, [mail.userId]);
    if (outage) throw new MailerUnavailableError(mail.userId);
    await this.gateway.query(
      `INSERT INTO demo_mailer_sent (idempotency_key, user_id, email) VALUES ($1, $2, $3)
       ON CONFLICT (idempotency_key) DO UPDATE SET calls = demo_mailer_sent.calls + 1`,
      [mail.idempotencyKey, mail.userId, mail.email],
    );
  }
}
