import { isFencedError, isInfrastructureError, isRetriableHandlerError } from './error-classification';

describe('error classification', () => {
  const pgError = (code: string) => Object.assign(new Error(`pg ${code}`), { name: 'QueryFailedError', driverError: { code } });

  it('treats PostgreSQL connection, rollback, lock and idle timeouts as infrastructure (never dead-lettered)', () => {
    for (const code of ['08006', '40001', '40P01', '53300', '57P01', '55P03', '25P03']) expect(isInfrastructureError(pgError(code))).toBe(true);
    expect(isInfrastructureError(new Error('Connection terminated unexpectedly'))).toBe(true);
  });

  it("leaves handler errors to the retry policy, even when they carry codes like the database's", () => {
    expect(isInfrastructureError(pgError('23505'))).toBe(false); // unique violation: the handler's data
    expect(isInfrastructureError(pgError('57014'))).toBe(false); // statement timeout
    expect(isInfrastructureError(Object.assign(new Error('upstream timed out'), { code: 'ETIMEDOUT' }))).toBe(false);
    expect(isInfrastructureError(Object.assign(new Error('conflict'), { code: '409' }))).toBe(false);
    expect(isInfrastructureError(Object.assign(new Error('pg'), { code: '40001', severity: 'ERROR' }))).toBe(true);
  });

  it('recognises fencing, also when wrapped', () => {
    expect(isFencedError({ type: 'INVALID_PRODUCER_EPOCH' })).toBe(true);
    expect(isFencedError({ name: 'KafkaJSNumberOfRetriesExceeded', originalError: { type: 'PRODUCER_FENCED' } })).toBe(true);
    expect(isFencedError({ type: 'REQUEST_TIMED_OUT' })).toBe(false);
  });

  it('retries handler errors unless they say they are not retriable', () => {
    expect(isRetriableHandlerError(new Error('x'))).toBe(true);
    expect(isRetriableHandlerError(Object.assign(new Error('x'), { retriable: false }))).toBe(false);
  });
});
