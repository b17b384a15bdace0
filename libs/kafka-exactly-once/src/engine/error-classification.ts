/**
 * What a failed unit of work tells the engine, decided by evidence (docs/protocol.md, "Failures"): only faults of the
 * infrastructure itself are retried without end; anything else may have been caused by one of the records,
 * so the chunk is re-run record by record and the record that fails alone is counted and, in the end,
 * dead-lettered.
 */

interface ErrorLike {
  name?: unknown;
  code?: unknown;
  type?: unknown;
  message?: unknown;
  severity?: unknown;
  retriable?: unknown;
  failure?: unknown;
  driverError?: ErrorLike;
  originalError?: unknown;
  cause?: unknown;
}

/** The error and what it wraps (KafkaJS `originalError`, standard `cause`, TypeORM `driverError`). */
function* chain(err: unknown): Generator<ErrorLike> {
  let e = err as ErrorLike | undefined;
  for (let depth = 0; e && typeof e === 'object' && depth < 6; depth++) {
    yield e;
    e = (e.originalError ?? e.cause ?? e.driverError) as ErrorLike | undefined;
  }
}

const CONNECTION_MESSAGES =
  /Connection terminated|Client has encountered a connection error|terminating connection|Query runner already released|timeout exceeded when trying to connect|Connection refused|the database system is (starting up|shutting down|in recovery)/i;

/** PostgreSQL SQLSTATEs that say nothing about the data: the server, the connection, or another session. */
function isPostgresInfrastructureCode(code: string): boolean {
  if (/^(08|53|58)/.test(code)) return true; // connection, insufficient resources, system error (I/O)
  if (/^57P0[1-5]$/.test(code)) return true; // admin/crash shutdown, cannot connect now, database dropped, idle session timeout
  // lock_timeout (another session holds the rows: a stalled instance, an operator) and
  // idle_in_transaction_session_timeout (the server ended this session's transaction).
  return code === '55P03' || code === '25P03';
}

/** Broker refusals caused by the record sent (its size or bytes): the only Kafka errors blamed on a record. */
const RECORD_REFUSALS = new Set(['MESSAGE_TOO_LARGE', 'RECORD_LIST_TOO_LARGE', 'INVALID_RECORD', 'CORRUPT_MESSAGE']);


/** KafkaJS errors that say the brokers did not answer (or not in time), not what they answered. */
const KAFKA_UNANSWERED = new Set([
  'KafkaJSConnectionError',
  'KafkaJSConnectionClosedError',
  'KafkaJSRequestTimeoutError',
  // The platformatic driver's: no answer (client/kafka-errors.ts), a SASL exchange (as KafkaJS's above).
  'KafkaConnectionError',
  'KafkaSASLAuthenticationError',
  'KafkaJSBrokerNotFound',
  'KafkaJSMetadataNotLoaded',
  'KafkaJSTimeout',
  'KafkaJSNumberOfRetriesExceeded',
  'DeadlineExceeded',
  // A SASL exchange cut short (the connection closed or timed out mid-handshake): a refusal of the credentials
  // is told apart before this is asked (KafkaAuthenticationError.from).
  'KafkaJSSASLAuthenticationError',
]);

/**
 * Whether a failed start against Kafka may succeed later with nothing changed: the brokers are away or slow
 * (connection refused, reset or timed out, a broker name that does not resolve yet, no answer in time) or
 * answer an error they mean to be retried (a leader or coordinator moving, metadata not everywhere yet). A
 * broker's refusal (authorization, a policy, an invalid configuration) or an error of the library's checks is
 * a configuration to fix: false.
 */
export function isKafkaUnavailable(err: unknown): boolean {
  // Several answers at once (createTopics' per-topic errors): unavailable only if each one says so.
  const inner = (err as { errors?: unknown })?.errors;
  if (Array.isArray(inner) && inner.length > 0) return inner.every(isKafkaUnavailable);
  const errors = [...chain(err)];
  // KafkaJS says "Failed to connect: …" when the socket cannot even be made from the options (a TLS key or
  // certificate that does not parse, a wrong passphrase): waiting does not fix that.
  if (errors.some((e) => e.name === 'KafkaJSConnectionError' && String(e.message ?? '').startsWith('Failed to connect: '))) return false;
  const protocol = errors.filter(isProtocolError).pop();
  if (protocol) return protocol.retriable === true;
  return errors.some((e) => KAFKA_UNANSWERED.has(String(e.name ?? '')) || ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE'].includes(String(e.code ?? '')));
}

/** Whether a broker answered (with an error code) rather than not answering at all. */
export function brokerAnswered(err: unknown): boolean {
  return [...chain(err)].some(isProtocolError);
}

/** A broker's error code, as KafkaJS throws it or as the other driver does (client/kafka-errors.ts). */
function isProtocolError(e: ErrorLike): boolean {
  return e.name === 'KafkaJSProtocolError' || e.name === 'KafkaProtocolError';
}

/**
 * Whether the error is a fault of the infrastructure (PostgreSQL or Kafka unreachable, connection lost,
 * server shutting down, out of resources, another session holding locks, not enough replicas): the unit of
 * work is retried as a whole, without end and with capped backoff, and no record is blamed for it.
 */
export function isConnectionFault(err: unknown): boolean {
  const errors = [...chain(err)];
  // The library's own statements fail only for the database's or the schema's reasons (see InboxStatementError).
  if (errors.some((e) => e.name === 'InboxStatementError')) return true;
  // The Schema Registry away (or a schema not registered for a topic written in its framing): no record's fault.
  if (errors.some((e) => e.name === 'SchemaRegistryError' && e.failure !== 'incompatible')) return true;
  // The application's @nestjs-cls/transactional cannot be lent the unit's transaction: its set-up's fault, and
  // running the handler anyway would commit its services' writes outside the unit.
  if (errors.some((e) => e.name === 'AmbientTransactionError')) return true;
  // KafkaJS protocol errors know whether the broker may accept the same request later (NOT_ENOUGH_REPLICAS,
  // NOT_LEADER, REQUEST_TIMED_OUT, COORDINATOR_LOAD_IN_PROGRESS...) or refuses it for good (MESSAGE_TOO_LARGE,
  // INVALID_RECORD): the innermost one decides, whatever wraps it.
  // Only a few refusals are about the record itself; any other non-retriable refusal (authorization, producer
  // or transaction state, policy) is the cluster's configuration or the producer's, and a fresh producer or an
  // operator fixes it: blaming records for it would dead-letter every record that writes there.
  const protocol = errors.filter((e) => isProtocolError(e) && typeof e.type === 'string').pop();
  if (protocol) return !RECORD_REFUSALS.has(protocol.type as string);
  for (const e of errors) {
    const name = String(e.name ?? '');
    const message = String(e.message ?? '');
    if (CONNECTION_MESSAGES.test(message)) return true;
    // A handler's own HTTP client may also say ETIMEDOUT or carry a `code`: only database errors count here.
    const fromDatabase = name === 'QueryFailedError' || typeof e.severity === 'string';
    const code = String(e.driverError?.code ?? e.code ?? '');
    if (fromDatabase && isPostgresInfrastructureCode(code)) return true;
    if (['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'EHOSTUNREACH'].includes(code) && (fromDatabase || /postgres|kafka|broker/i.test(message))) return true;
    // Any other KafkaJS error without a broker refusal inside (connection, request timeout, a producer or
    // transaction state that a fresh producer clears) is the client's or the cluster's, not the record's; so is
    // a send the broker did not answer for every partition.
    if (name.startsWith('KafkaJS') || name === 'KafkaConnectionError' || name === 'KafkaSASLAuthenticationError' || name === 'ProduceIncompleteError') return true;
  }
  return false;
}

/**
 * Whether a statement failed because the transaction was already aborted (SQLSTATE 25P02: an earlier statement
 * failed and was swallowed), which is not the failing call's own doing.
 */
export function failedInAbortedTransaction(err: unknown): boolean {
  return [...chain(err)].some((e) => String(e.driverError?.code ?? e.code ?? '') === '25P02');
}

/** Marks an error a handler raised (or a statement of its own): the consumer may blame the record for it. */
const RAISED_BY_HANDLER = Symbol('kafka-exactly-once:raised-by-handler');

/** Marks `err` as raised by a handler's call (not by the library's own statements or sends), and returns it. */
export function raisedByHandler<T>(err: T): T {
  if (err && typeof err === 'object' && !Object.isFrozen(err)) Object.defineProperty(err, RAISED_BY_HANDLER, { value: true, configurable: true });
  return err;
}

/**
 * PostgreSQL SQLSTATEs a statement can bring on by itself: out of memory, a configuration limit (locks per
 * transaction). Not disk full or too many connections (the server's), nor 57P02, which every session gets when
 * some backend crashed (the one whose statement crashed it sees its connection cut, without a code).
 */
function isRecordInducedPostgresCode(code: string): boolean {
  return code === '53200' || code === '53400';
}

/**
 * An infrastructure-looking fault that a handler's own call raised and that its record may cause: PostgreSQL out
 * of memory or over a configuration limit (53200, 53400), the connection cut under its statement without a code
 * (its backend crashed), or an error of the handler's own KafkaJS client. Retried like any infrastructure fault, but counted for the record when it comes
 * back with the record alone, so that after `isolation.maxFailures` the record is dead-lettered and the line
 * moves. An administrator's termination (57P01), the crash of another backend (57P02), a full disk, too many
 * connections, a lock or idle timeout, a server shutting down stay faults of the infrastructure.
 */
export function isRecordSuspectFault(err: unknown): boolean {
  if (!(err && typeof err === 'object' && (err as Record<symbol, unknown>)[RAISED_BY_HANDLER] === true)) return false;
  for (const e of chain(err)) {
    const name = String(e.name ?? '');
    if (name.startsWith('KafkaJS')) return true;
    const code = String(e.driverError?.code ?? e.code ?? '');
    if (code) return isRecordInducedPostgresCode(code);
    if (/Connection terminated unexpectedly|server closed the connection unexpectedly/i.test(String(e.message ?? ''))) return true;
  }
  return false;
}

/** KafkaJS error types that mean another producer with our transactional id took over (or the broker bumped the epoch). */
const FENCED_TYPES = new Set(['INVALID_PRODUCER_EPOCH', 'PRODUCER_FENCED']);

export function isFencedError(err: unknown): boolean {
  for (const e of chain(err)) if (typeof e.type === 'string' && FENCED_TYPES.has(e.type)) return true;
  return false;
}

/** The broker refuses an output for its size: its input is dead-lettered with reason `output-too-large`. */
export function isOutputTooLarge(err: unknown): boolean {
  for (const e of chain(err)) {
    if (e.name === 'OutputTooLargeError') return true;
    if (e.type === 'MESSAGE_TOO_LARGE' || e.type === 'RECORD_LIST_TOO_LARGE') return true;
  }
  return false;
}

/** Marks an error that Nest's pipeline raised to refuse an event before its handler ran (see HandlerPipeline). */
export const REFUSED_BY_PIPELINE = Symbol('kafka-exactly-once:refused-by-pipeline');

/**
 * Whether the handler's error is worth another attempt: everything unless it says it is not, or Nest's pipeline
 * refused the event before the handler ran (a guard or a pipe: the same event meets it again on every attempt).
 */
export function isRetriableHandlerError(err: unknown): boolean {
  const retriable = (err as { retriable?: unknown } | undefined)?.retriable;
  if (retriable === false) return false;
  return !(typeof err === 'object' && err !== null && (err as Record<symbol, unknown>)[REFUSED_BY_PIPELINE] === true);
}

/**
 * Whether Nest's pipeline refused the event with a 400 before the handler ran: what a ValidationPipe (or any pipe
 * that validates) throws, BadRequestException. Such a record is dead-lettered as `validation-failed`, like an event
 * that fails the handler's own `validate`.
 */
export function isValidationRefusal(err: unknown): boolean {
  if (typeof err !== 'object' || err === null || (err as Record<symbol, unknown>)[REFUSED_BY_PIPELINE] !== true) return false;
  const status = (err as { getStatus?: () => unknown }).getStatus;
  return typeof status === 'function' && status.call(err) === 400;
}
