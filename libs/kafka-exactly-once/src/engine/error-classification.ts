/**
 * Failures of the database or of the connection to it, as opposed to a handler's own failure: the whole unit
 * of work is rolled back and tried again later, and the record is never dead-lettered for them (that would
 * put an infrastructure hiccup on a customer's payment and break per-key order).
 */
export function isInfrastructureError(err: unknown): boolean {
  const e = err as { code?: unknown; driverError?: { code?: unknown }; message?: unknown } | undefined;
  const code = String(e?.driverError?.code ?? e?.code ?? '');
  if (/^(08|40|53|57)/.test(code)) return true; // connection, rollback (serialization, deadlock), resources, operator intervention
  if (code === '55P03' || code === '25P03') return true; // lock timeout, idle-in-transaction timeout
  if (['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT'].includes(code)) return true;
  const message = String(e?.message ?? '');
  return /Connection terminated|connection is closed|Client has encountered a connection error|terminating connection/i.test(message);
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
