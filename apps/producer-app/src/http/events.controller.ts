import { Body, Controller, Headers, HttpCode, Post } from '@nestjs/common';
import { EventPublisher, PublishResult } from 'kafka-exactly-once';
import { PaymentRequested, TOPICS, UserSignedUp } from '../demo-events';
import { InvalidRequestError } from './invalid-request.error';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** JSON in, events out: 202 with the message id and whether the event was sent or spooled. */
@Controller()
export class EventsController {
  constructor(private readonly publisher: EventPublisher) {}

  @Post('users/signups')
  @HttpCode(202)
  async signUp(@Body() body: Record<string, unknown>, @Headers('idempotency-key') idempotencyKey?: string): Promise<Pick<PublishResult, 'messageId' | 'status'>> {
    const event = { ...body, timestamp: body?.timestamp ?? new Date().toISOString() } as unknown as UserSignedUp;
    const { messageId, status } = await this.publisher.publish(TOPICS.usersSignedUp, event, { messageId: idempotencyKey || undefined });
    return { messageId, status };
  }

  @Post('payments')
  @HttpCode(202)
  async requestPayment(@Body() body: Record<string, unknown>, @Headers('idempotency-key') idempotencyKey?: string): Promise<Pick<PublishResult, 'messageId' | 'status'>> {
    if (typeof body?.paymentId === 'string' && !UUID.test(body.paymentId)) {
      throw new InvalidRequestError([{ path: 'paymentId', problem: `expected a UUID, got ${JSON.stringify(body.paymentId)}` }]);
    }
    // JSON has no 64-bit integers: accept amountCents as a number or as a string of digits.
    const amount = typeof body?.amountCents === 'string' && /^-?\d+$/.test(body.amountCents) ? BigInt(body.amountCents) : body?.amountCents;
    const event = { ...body, amountCents: amount, requestedAt: body?.requestedAt ?? new Date().toISOString() } as unknown as PaymentRequested;
    const { messageId, status } = await this.publisher.publish(TOPICS.paymentsRequested, event, { messageId: idempotencyKey || undefined });
    return { messageId, status };
  }
}
