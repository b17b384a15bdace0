/**
 * Failures of the database or of the connection to it, as opposed to a handler's own failure: the whole unit
 * of work is rolled back and tried again later, and the record is never dead-lettered for them (that would
 * put an infrastructure hiccup on a customer's payment and break per-key order).
 */
export function isInfrastructureError(err: unknown): boolean {
  const e = err as { code?: unknown; driverError?: { code?: unknown }; message?: unknown; severity?: unknown; name?: unknown } | undefined;
  if (!e) return false;
  // Only errors that come from PostgreSQL or its driver: a handler's own HTTP client may also say ETIMEDOUT or
  // carry a `code`, and retrying those forever would stop the line instead of dead-lettering the record.
  const fromDatabase = e.name === 'QueryFailedError' || e.driverError !== undefined || typeof e.severity === 'string';
  const message = String(e.message ?? '');
  if (/Connection terminated|Client has encountered a connection error|terminating connection|Query runner already released/i.test(message)) return true;
  if (!fromDatabase) return false;
  const code = String(e.driverError?.code ?? e.code ?? '');
  if (code === '57014') return false; // statement timeout: the handler's own query was too slow, retry then dead-letter
  if (/^(08|40|53|57)/.test(code)) return true; // connection, rollback (serialization, deadlock), resources, operator intervention
  if (code === '55P03' || code === '25P03') return true; // lock timeout, idle-in-transaction timeout
  return ['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT'].includes(code);
}

/** KafkaJS error types that mean another producer with our transactional id took over. */
const FENCED_TYPES = new Set(['INVALID_PRODUCER_EPOCH', 'PRODUCER_FENCED']);

export function isFencedError(err: unknown): boolean {
  for (let e = err as { type?: string; cause?: unknown; originalError?: unknown } | undefined, depth = 0; e && depth < 5; depth++) {
    if (e.type && FENCED_TYPES.has(e.type)) return true;
    e = (e.originalError ?? e.cause) as typeof e;
  }
  return false;
}

/** Whether the handler's error is worth another attempt: everything unless it says it is not. */
export function isRetriableHandlerError(err: unknown): boolean {
  const retriable = (err as { retriable?: unknown } | undefined)?.retriable;
  return retriable !== false;
}
