import { ArgumentsHost, Catch, ExceptionFilter, HttpException } from '@nestjs/common';
import type { Response } from 'express';
import { EventValidationError, InvalidPublishOptionsError, MissingKeyError, OutboxWriteError, PublishError, UndeliverableEventError } from 'kafka-exactly-once';
import { InvalidRequestError } from './invalid-request.error';

/**
 * Publishing errors as HTTP answers: invalid events are 400 with the field errors; an event Kafka can never
 * take is 413 (too large) or 422 (its topic does not exist, or the broker refuses it), and retrying it cannot
 * help; a full spool is 503 with the event's message id and outcome (retry with the same Idempotency-Key). An
 * outbox write refused is 413 (too large) or 400.
 */
@Catch(EventValidationError, MissingKeyError, PublishError, UndeliverableEventError, InvalidRequestError, InvalidPublishOptionsError, OutboxWriteError, HttpException)
export class PublishErrorsFilter implements ExceptionFilter {
  catch(error: Error, host: ArgumentsHost): void {
    const response = host.switchToHttp().getResponse<Response>();
    if (error instanceof HttpException) {
      response.status(error.getStatus()).json(error.getResponse());
    } else if (error instanceof EventValidationError || error instanceof InvalidRequestError) {
      response.status(400).json({ statusCode: 400, error: 'Bad Request', message: error.message, fieldErrors: error.fieldErrors });
    } else if (error instanceof UndeliverableEventError) {
      const status = error.reason === 'too-large' ? 413 : 422;
      response.status(status).json({
        statusCode: status,
        error: status === 413 ? 'Payload Too Large' : 'Unprocessable Content',
        message: error.message,
        reason: error.reason,
        messageId: error.messageId,
        ...(error.recordBytes === undefined ? {} : { recordBytes: error.recordBytes, limitBytes: error.limitBytes }),
      });
    } else if (error instanceof OutboxWriteError) {
      const status = error.refusal === 'too-large' ? 413 : 400;
      response.status(status).json({ statusCode: status, error: status === 413 ? 'Payload Too Large' : 'Bad Request', message: error.message, reason: error.refusal });
    } else if (error instanceof MissingKeyError || error instanceof InvalidPublishOptionsError) {
      response.status(400).json({ statusCode: 400, error: 'Bad Request', message: error.message });
    } else if (error instanceof PublishError) {
      // Neither sent nor spooled (the spool is full, or its disk failed). `outcome: 'unknown'`: the event may be in
      // Kafka already. Either way, the client retries with the same Idempotency-Key, which gives the same message
      // id, so that consumers deduplicate a copy.
      response
        .status(503)
        .setHeader('Retry-After', '5')
        .json({ statusCode: 503, error: 'Service Unavailable', message: error.message, messageId: error.messageId, outcome: error.outcome });
    } else {
      response.status(503).setHeader('Retry-After', '5').json({ statusCode: 503, error: 'Service Unavailable', message: error.message });
    }
  }
}
