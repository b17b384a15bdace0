import { Inject, Injectable } from '@nestjs/common';
import { EventContext, IdempotentHandler } from 'kafka-exactly-once';
import { consumerAppConfig } from '../consumer-app.config';
import { DATA_LAYER, type DemoDataLayer } from '../data-layer/demo-store';
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
  constructor(
    private readonly mailer: DemoMailer,
    @Inject(DATA_LAYER) private readonly data: DemoDataLayer,
  ) {}

  @IdempotentHandler({
    topic: DEMO_TOPICS.welcomeEmail,
    ...readAs('com.example.WelcomeEmailRequested', WelcomeEmailRequestedDto),
    retry: { attempts: 2, initialDelayMs: 50 },
    retryTopics: { delays: consumerAppConfig().welcomeEmailRetryDelays },
  })
  async onWelcomeEmail(event: WelcomeEmailRequested, ctx: EventContext<unknown>): Promise<void> {
    // The same key in every run of this record (in-place attempts, every tier, a replay): the gateway sends once.
    await this.mailer.send({ userId: event.userId, email: event.email, idempotencyKey: ctx.idempotencyKey });
    await this.data.store(ctx.db).addWelcomeEmailSent({ userId: event.userId, email: event.email, messageId: ctx.message.messageId, topic: ctx.message.topic, attempt: ctx.attempt });
  }
}
