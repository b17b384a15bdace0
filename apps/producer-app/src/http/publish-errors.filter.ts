import { ArgumentsHost, Catch, ExceptionFilter, HttpException } from '@nestjs/common';
import type { Response } from 'express';
import { EventValidationError, MissingKeyError, SpoolFullError } from 'kafka-exactly-once';
import { InvalidRequestError } from './invalid-request.error';

/** Publishing errors as HTTP answers: invalid events are 400 with the field errors, a full spool is 503. */
@Catch(EventValidationError, MissingKeyError, SpoolFullError, InvalidRequestError, HttpException)
export class PublishErrorsFilter implements ExceptionFilter {
  catch(error: Error, host: ArgumentsHost): void {
    const response = host.switchToHttp().getResponse<Response>();
    if (error instanceof HttpException) {
      response.status(error.getStatus()).json(error.getResponse());
    } else if (error instanceof EventValidationError || error instanceof InvalidRequestError) {
      response.status(400).json({ statusCode: 400, error: 'Bad Request', message: error.message, fieldErrors: error.fieldErrors });
    } else if (error instanceof MissingKeyError) {
      response.status(400).json({ statusCode: 400, error: 'Bad Request', message: error.message });
    } else {
      response.status(503).setHeader('Retry-After', '5').json({ statusCode: 503, error: 'Service Unavailable', message: error.message });
    }
  }
}
