import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';

/** The fake gateway is down: worth trying again later. */
export class MailerUnavailableError extends Error {
  constructor(userId: number) {
    super(`mail gateway unavailable (user ${userId})`);
    this.name = 'MailerUnavailableError';
  }
}

/**
 * The demo's fake mail gateway, a downstream outside the database: it fails while an outage in
 * `demo_mailer_outages` lasts (for every user, or every n-th user id), and for good for addresses at
 * `bounce.invalid`. It sends nothing; the handler records what it would send.
 */
@Injectable()
export class DemoMailer {
  async send(manager: EntityManager, userId: number, email: string): Promise<void> {
    if (email.endsWith('@bounce.invalid')) throw new Error(`mailbox ${email} does not answer`);
    const [outage] = await manager.query(`SELECT 1 FROM demo_mailer_outages WHERE down_until > now() AND $1::int % every_nth_user = 0 LIMIT 1`, [userId]);
    if (outage) throw new MailerUnavailableError(userId);
  }
}
