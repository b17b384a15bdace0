import { ArgumentsHost, Catch, ExceptionFilter } from '@nestjs/common';
import { OperatorRequestError } from '../errors/operator-request.error';

/** An operator's request refused: 400 (naming the field), 404 or 409, with a message that says why. */
@Catch(OperatorRequestError)
export class OperatorErrorsFilter implements ExceptionFilter {
  catch(error: OperatorRequestError, host: ArgumentsHost): void {
    const response = host.switchToHttp().getResponse<{ status(code: number): { json(body: unknown): void } }>();
    const label = { 400: 'Bad Request', 404: 'Not Found', 409: 'Conflict' }[error.status];
    response.status(error.status).json({ statusCode: error.status, error: label, message: error.message, ...(error.field ? { field: error.field } : {}) });
  }
}
