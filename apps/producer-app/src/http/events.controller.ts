import { Body, Controller, Headers, HttpException, Optional, Post, Res } from '@nestjs/common';
import type { Response } from 'express';
import { EventPublisher, PublishResult } from 'kafka-exactly-once';
import { PaymentRequestOutcome, PaymentRequestsService, RolledBackOnPurpose } from '../outbox/payment-requests.service';
import { PaymentRequested, TOPICS, UserSignedUp, paymentForWire } from '../demo-events';
import { producerAppConfig } from '../producer-app.config';
import { scopedMessageId } from './idempotency-key';
import { InvalidRequestError } from './invalid-request.error';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * JSON in, events out: 202 with the message id and whether the event was sent or spooled. An `Idempotency-Key`
 * makes the message id, scoped to the route, the caller (`X-Client-Id`) and the request (scopedMessageId): the
 * same request sent again with the same key is the same event. In outbox mode
 * (PAYMENTS_MODE=outbox) POST /payments answers after its transaction committed: 201 `committed` with the
 * event's message id, or 200 `duplicate` when the paymentId was requested before (one row, one event).
 */
@Controller()
export class EventsController {
  constructor(
    private readonly publisher: EventPublisher,
    @Optional() private readonly paymentRequests?: PaymentRequestsService,
  ) {}

  @Post('users/signups')
  async signUp(
    @Body() body: Record<string, unknown>,
    @Res({ passthrough: true }) res: Response,
    @Headers('idempotency-key') idempotencyKey?: string,
    @Headers('x-client-id') clientId?: string,
  ): Promise<Pick<PublishResult, 'messageId' | 'status'>> {
    const event = { ...body, timestamp: body?.timestamp ?? new Date().toISOString() } as unknown as UserSignedUp;
    const { messageId, status } = await this.publisher.publish(TOPICS.usersSignedUp, event, { messageId: scopedMessageId('POST /users/signups', clientId, idempotencyKey, body) });
    res.status(202);
    return { messageId, status };
  }

  @Post('payments')
  async requestPayment(
    @Body() body: Record<string, unknown>,
    @Res({ passthrough: true }) res: Response,
    @Headers('idempotency-key') idempotencyKey?: string,
    @Headers('x-demo-roll-back') rollBack?: string,
    @Headers('x-client-id') clientId?: string,
  ): Promise<Pick<PublishResult, 'messageId' | 'status'> | PaymentRequestOutcome> {
    if (typeof body?.paymentId === 'string' && !UUID.test(body.paymentId)) {
      throw new InvalidRequestError([{ path: 'paymentId', problem: `expected a UUID, got ${JSON.stringify(body.paymentId)}` }]);
    }
    // JSON has no 64-bit integers: accept amountCents as a number or as a string of digits.
    const amount = typeof body?.amountCents === 'string' && /^-?\d+$/.test(body.amountCents) ? BigInt(body.amountCents) : body?.amountCents;
    const event = forWire({ ...body, amountCents: amount, requestedAt: body?.requestedAt ?? new Date().toISOString() } as unknown as PaymentRequested);
    const messageId = scopedMessageId('POST /payments', clientId, idempotencyKey, body);
    if (this.paymentRequests) {
      if (typeof event.paymentId !== 'string') throw new InvalidRequestError([{ path: 'paymentId', problem: 'required in outbox mode (the request is idempotent on it)' }]);
      try {
        const outcome = await this.paymentRequests.request(event, { messageId, rollBack: rollBack === '1' || rollBack === 'true' });
        res.status(outcome.status === 'committed' ? 201 : 200);
        return outcome;
      } catch (err) {
        if (err instanceof RolledBackOnPurpose) throw new HttpException({ statusCode: 409, status: 'rolled-back', message: err.message }, 409);
        throw err;
      }
    }
    const published = await this.publisher.publish(TOPICS.paymentsRequested, event, { messageId });
    res.status(202);
    return { messageId: published.messageId, status: published.status };
  }
}

/** The payment as its topic is written (EVENT_FORMAT); an amount JSON cannot carry exactly is the caller's error (400). */
function forWire(event: PaymentRequested): PaymentRequested {
  try {
    return paymentForWire(event, producerAppConfig().eventFormat);
  } catch (err) {
    throw new InvalidRequestError([{ path: 'amountCents', problem: (err as Error).message }]);
  }
}
