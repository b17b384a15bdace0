import { AmbientTransactionError } from '../errors/ambient-transaction.error';
import { ProduceIncompleteError } from '../errors/produce-incomplete.error';
import { REFUSED_BY_PIPELINE, isRecordSuspectFault, raisedByHandler, isConnectionFault, isKafkaUnavailable, isFencedError, isOutputTooLarge, isRetriableHandlerError } from './error-classification';

describe('error classification', () => {
  const pgError = (code: string) => Object.assign(new Error(`pg ${code}`), { name: 'QueryFailedError', driverError: { code } });
  const kafkaError = (type: string, retriable: boolean) => Object.assign(new Error(type), { name: 'KafkaJSProtocolError', type, retriable });

  it('treats connection, server and lock-wait faults of PostgreSQL as infrastructure (retried, never dead-lettered)', () => {
    for (const code of ['08006', '08003', '53300', '53100', '57P01', '57P03', '55P03', '25P03', '58030']) expect(isConnectionFault(pgError(code))).toBe(true);
    expect(isConnectionFault(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isConnectionFault(Object.assign(new Error('pg'), { code: '57P01', severity: 'FATAL' }))).toBe(true);
  });

  it('leaves everything that data can cause to isolation: constraint, encoding, serialization, deadlock, statement timeout', () => {
    for (const code of ['23505', '23503', '22021', '22P02', '25P02', '40001', '40P01', '57014', '42P01']) expect(isConnectionFault(pgError(code))).toBe(false);
  });

  it("blames the database, never a record, when the library's own statements fail (e.g. a missing migration)", () => {
    expect(isConnectionFault({ name: 'InboxStatementError', message: 'the inbox claim failed', cause: pgError('42703') })).toBe(true);
    expect(isConnectionFault(pgError('42703'))).toBe(false); // the same error from a handler's own query
  });

  it("blames the application's set-up, never a record, when a unit cannot lend its transaction to @nestjs-cls/transactional", () => {
    const refused = raisedByHandler(new AmbientTransactionError('join-not-taken', 'the join did not take'));
    expect(isConnectionFault(refused)).toBe(true);
    expect(isRecordSuspectFault(refused)).toBe(false);
  });

  it("does not take a handler's own error codes for the database's", () => {
    expect(isConnectionFault(Object.assign(new Error('upstream timed out'), { code: 'ETIMEDOUT' }))).toBe(false);
    expect(isConnectionFault(Object.assign(new Error('upstream reset'), { code: 'ECONNRESET' }))).toBe(false);
    expect(isConnectionFault(Object.assign(new Error('conflict'), { code: '409' }))).toBe(false);
    expect(isConnectionFault(new Error('boom'))).toBe(false);
  });

  it('treats Kafka connection loss and retriable broker errors as infrastructure, refusals for good as record-level', () => {
    expect(isConnectionFault(Object.assign(new Error('Connection error'), { name: 'KafkaJSConnectionError' }))).toBe(true);
    expect(isConnectionFault(kafkaError('NOT_ENOUGH_REPLICAS', true))).toBe(true);
    expect(isConnectionFault({ name: 'KafkaJSNumberOfRetriesExceeded', originalError: kafkaError('REQUEST_TIMED_OUT', true) })).toBe(true);
    expect(isConnectionFault(kafkaError('MESSAGE_TOO_LARGE', false))).toBe(false);
    expect(isConnectionFault(kafkaError('INVALID_RECORD', false))).toBe(false);
    // Refusals about the cluster or the producer, not the record: never blamed on records.
    for (const type of ['TOPIC_AUTHORIZATION_FAILED', 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED', 'OUT_OF_ORDER_SEQUENCE_NUMBER', 'INVALID_TXN_STATE', 'POLICY_VIOLATION']) {
      expect(isConnectionFault(kafkaError(type, false))).toBe(true);
    }
    expect(isConnectionFault({ name: 'KafkaJSNonRetriableError', message: 'x', cause: kafkaError('MESSAGE_TOO_LARGE', false) })).toBe(false);
    expect(isConnectionFault(Object.assign(new Error('Transaction state exception'), { name: 'KafkaJSNonRetriableError' }))).toBe(true);
  });

  it('tells a Kafka that is away or not ready yet (the start waits for it) from a configuration to fix (the boot fails)', () => {
    const named = (name: string, message: string, extra: Record<string, unknown> = {}) => Object.assign(new Error(message), { name, ...extra });
    const refused = named('KafkaJSConnectionError', 'Connection error: connect ECONNREFUSED 127.0.0.1:9092', { code: 'ECONNREFUSED' });
    expect(isKafkaUnavailable(refused)).toBe(true);
    expect(isKafkaUnavailable(named('KafkaJSNonRetriableError', 'Connection error', { originalError: refused }))).toBe(true);
    expect(isKafkaUnavailable(named('KafkaJSNumberOfRetriesExceeded', 'retries exceeded'))).toBe(true);
    expect(isKafkaUnavailable(named('DeadlineExceeded', 'Kafka did not answer within 3000 ms'))).toBe(true);
    expect(isKafkaUnavailable(Object.assign(new Error('getaddrinfo ENOTFOUND kafka-0'), { code: 'ENOTFOUND' }))).toBe(true);
    expect(isKafkaUnavailable(named('KafkaJSProtocolError', 'This server does not host this topic-partition', { type: 'UNKNOWN_TOPIC_OR_PARTITION', retriable: true }))).toBe(true);
    expect(isKafkaUnavailable(named('KafkaJSProtocolError', 'Not authorized to access topics', { type: 'TOPIC_AUTHORIZATION_FAILED', retriable: false }))).toBe(false);
    expect(isKafkaUnavailable(named('KafkaJSNumberOfRetriesExceeded', 'gave up', { originalError: named('KafkaJSProtocolError', 'Not authorized to access group', { type: 'GROUP_AUTHORIZATION_FAILED', retriable: false }) }))).toBe(false);
    expect(isKafkaUnavailable(new Error('Kafka topic(s) orders do not exist: create them before starting'))).toBe(false);
    // A SASL handshake cut short by the network waits; a TLS option that does not parse does not.
    expect(isKafkaUnavailable(named('KafkaJSSASLAuthenticationError', 'SASL SCRAM SHA256 authentication failed: Connection closed by the server'))).toBe(true);
    expect(isKafkaUnavailable(named('KafkaJSConnectionError', 'Failed to connect: error:1E08010C:DECODER routines::unsupported'))).toBe(false);
    // createTopics' per-topic answers: unavailable only if each one is.
    const timedOut = named('KafkaJSProtocolError', 'The request timed out', { type: 'REQUEST_TIMED_OUT', retriable: true });
    const policy = named('KafkaJSProtocolError', 'Topic creation denied', { type: 'POLICY_VIOLATION', retriable: false });
    expect(isKafkaUnavailable(named('KafkaJSAggregateError', 'Topic creation errors', { errors: [timedOut, timedOut] }))).toBe(true);
    expect(isKafkaUnavailable(named('KafkaJSAggregateError', 'Topic creation errors', { errors: [timedOut, policy] }))).toBe(false);
  });

  it('classifies a send the broker did not answer for every partition by what it said', () => {
    const incomplete = (cause?: unknown) => new ProduceIncompleteError('send incomplete', { outcome: 'unknown', written: [], cause });
    expect(isConnectionFault(incomplete())).toBe(true); // deadline passed, producer disconnecting
    expect(isConnectionFault(incomplete(Object.assign(new Error('Connection closed'), { name: 'KafkaJSConnectionClosedError' })))).toBe(true);
    expect(isConnectionFault(incomplete(kafkaError('NOT_LEADER_FOR_PARTITION', true)))).toBe(true);
    expect(isConnectionFault(incomplete(kafkaError('MESSAGE_TOO_LARGE', false)))).toBe(false);
    expect(isOutputTooLarge(incomplete(kafkaError('MESSAGE_TOO_LARGE', false)))).toBe(true);
    expect(isFencedError(incomplete(kafkaError('INVALID_PRODUCER_EPOCH', false)))).toBe(true);
    expect(incomplete(kafkaError('MESSAGE_TOO_LARGE', false)).retriable).toBe(false);
  });

  it("suspects the record of infrastructure-looking faults its handler's own call raised, when the record can cause them", () => {
    const pg = (code: string) => raisedByHandler(pgError(code));
    expect(isRecordSuspectFault(pg('53200'))).toBe(true); // out of memory
    expect(isRecordSuspectFault(pg('53400'))).toBe(true); // a configuration limit (locks per transaction)
    expect(isRecordSuspectFault(raisedByHandler(new Error('Connection terminated unexpectedly')))).toBe(true); // its backend crashed
    expect(isRecordSuspectFault(raisedByHandler(Object.assign(new Error('connect ECONNREFUSED'), { name: 'KafkaJSConnectionError' })))).toBe(true);
    // An operator's termination, a lock wait, an idle timeout, a shutdown: the infrastructure's, whoever met it.
    // Another backend's crash, a full disk, too many connections: the server's, not this record's.
    for (const code of ['57P01', '57P02', '53100', '53300', '55P03', '25P03', '57P03', '08006']) expect(isRecordSuspectFault(pg(code))).toBe(false);
    // The same faults met by the library's own statements are never the record's.
    expect(isRecordSuspectFault(pgError('53200'))).toBe(false);
    expect(isRecordSuspectFault({ name: 'InboxStatementError', cause: pgError('53200') })).toBe(false);
  });

  it('recognises fencing, also when wrapped', () => {
    expect(isFencedError({ type: 'INVALID_PRODUCER_EPOCH' })).toBe(true);
    expect(isFencedError({ name: 'KafkaJSNumberOfRetriesExceeded', originalError: { type: 'PRODUCER_FENCED' } })).toBe(true);
    expect(isFencedError({ type: 'REQUEST_TIMED_OUT' })).toBe(false);
  });

  it('recognises an output the broker refuses for its size', () => {
    expect(isOutputTooLarge(kafkaError('MESSAGE_TOO_LARGE', false))).toBe(true);
    expect(isOutputTooLarge({ name: 'KafkaJSNonRetriableError', cause: kafkaError('RECORD_LIST_TOO_LARGE', false) })).toBe(true);
    expect(isOutputTooLarge(kafkaError('INVALID_RECORD', false))).toBe(false);
  });

  it('retries handler errors unless they say they are not retriable', () => {
    expect(isRetriableHandlerError(new Error('x'))).toBe(true);
    expect(isRetriableHandlerError(Object.assign(new Error('x'), { retriable: false }))).toBe(false);
  });

  it('does not retry what Nest\'s pipeline marked as a refusal', () => {
    const refused = new Error('Forbidden resource');
    Object.defineProperty(refused, REFUSED_BY_PIPELINE, { value: true });
    expect(isRetriableHandlerError(refused)).toBe(false);
    expect(isRetriableHandlerError(new Error('Forbidden resource'))).toBe(true);
  });
});
