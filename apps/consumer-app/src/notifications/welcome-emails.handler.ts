import { Injectable } from '@nestjs/common';
import { EventContext, IdempotentHandler } from 'kafka-exactly-once';
import { consumerAppConfig } from '../consumer-app.config';
import { readAs } from '../formats/event-format';
import { DEMO_TOPICS } from '../topics/demo-topics';
import { DemoMailer } from './demo-mailer';
import { WelcomeEmailRequestedDto } from './welcome-email-requested.dto';

/** com.example.WelcomeEmailRequested (schemas/welcome-email-requested.v1.avsc). */
export interface WelcomeEmailRequested {
  userId: number;
  email: string;
  requestedAt: string;
}

/**
 * Sends each welcome email once, through a gateway that is down now and then. No per-key order is needed, so
 * a failing email moves to the retry topics (WELCOME_EMAIL_RETRY_DELAYS) and the others go on; after the last
 * tier it is dead-lettered with the history of its attempts.
 */
@Injectable()
export class WelcomeEmailsHandler {
  constructor(private readonly mailer: DemoMailer) {}

  @IdempotentHandler({
    topic: DEMO_TOPICS.welcomeEmail,
    ...readAs('com.example.WelcomeEmailRequested', WelcomeEmailRequestedDto),
    retry: { attempts: 2, initialDelayMs: 50 },
    retryTopics: { delays: consumerAppConfig().welcomeEmailRetryDelays },
  })
  async onWelcomeEmail(event: WelcomeEmailRequested, ctx: EventContext): Promise<void> {
    // The same key in every run of this record (in-place attempts, every tier, a replay): the gateway sends once.
    await this.mailer.send({ userId: event.userId, email: event.email, idempotencyKey: ctx.idempotencyKey });
    await ctx.manager.query(`INSERT INTO welcome_emails_sent (user_id, email, message_id, topic, attempt) VALUES ($1, $2, $3, $4, $5)`, [
      event.userId,
      event.email,
      ctx.message.messageId,
      ctx.message.topic,
      ctx.attempt,
    ]);
  }
}
