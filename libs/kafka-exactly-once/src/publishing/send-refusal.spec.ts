import { KafkaProtocolError } from '../client/kafka-errors';
import { describeRefusal, refusedForGood } from './send-refusal';

// Shaped like KafkaJS's errors: a protocol error with a type, wrapped by the retrier.
const protocolError = (type: string, retriable: boolean) => Object.assign(new Error(`broker says ${type}`), { name: 'KafkaJSProtocolError', type, retriable });

describe('refusedForGood', () => {
  it('finds a refusal for good, bare or inside the wrappers KafkaJS adds', () => {
    expect(refusedForGood(protocolError('MESSAGE_TOO_LARGE', false))).toBe('MESSAGE_TOO_LARGE');
    const nonRetriable = Object.assign(new Error('wrapped'), { name: 'KafkaJSNonRetriableError', cause: protocolError('INVALID_RECORD', false) });
    expect(refusedForGood(nonRetriable)).toBe('INVALID_RECORD');
    const exhausted = Object.assign(new Error('retries exceeded'), { name: 'KafkaJSNumberOfRetriesExceeded', originalError: protocolError('INVALID_RECORD', false) });
    expect(refusedForGood(exhausted)).toBe('INVALID_RECORD');
    // An ACL is fixed by an operator: waiting, not quarantining.
    expect(refusedForGood(protocolError('TOPIC_AUTHORIZATION_FAILED', false))).toBeUndefined();
  });

  it('does not take what may pass for a refusal: connections, timeouts, leaders, sequences, a missing topic', () => {
    expect(refusedForGood(Object.assign(new Error('Connection closed'), { name: 'KafkaJSConnectionClosedError' }))).toBeUndefined();
    expect(refusedForGood(new Error('Kafka did not answer within 1000 ms'))).toBeUndefined();
    expect(refusedForGood(protocolError('NOT_LEADER_FOR_PARTITION', true))).toBeUndefined();
    expect(refusedForGood(protocolError('OUT_OF_ORDER_SEQUENCE_NUMBER', false))).toBeUndefined();
    expect(refusedForGood(protocolError('UNKNOWN_TOPIC_OR_PARTITION', true))).toBeUndefined();
    expect(refusedForGood(undefined)).toBeUndefined();
  });

  it('survives an error that is its own cause', () => {
    const loop: Error & { cause?: unknown } = new Error('loop');
    loop.cause = loop;
    expect(refusedForGood(loop)).toBeUndefined();
  });
});

describe('describeRefusal', () => {
  it('names the Kafka error type and keeps the broker message', () => {
    expect(describeRefusal('MESSAGE_TOO_LARGE', new Error('The request included a message larger than the max message size'))).toBe(
      'MESSAGE_TOO_LARGE: The request included a message larger than the max message size',
    );
  });

  it('puts the type first when the message names it already (a wrapper around a KafkaProtocolError), once', () => {
    const inner = new KafkaProtocolError('MESSAGE_TOO_LARGE', 10, false, 'The request included a message larger than the max message size');
    const wrapped = new Error(`send incomplete: the broker refused the records for t[2]: ${inner.message}`, { cause: inner });
    expect(describeRefusal('MESSAGE_TOO_LARGE', inner)).toBe('MESSAGE_TOO_LARGE: The request included a message larger than the max message size');
    expect(describeRefusal('MESSAGE_TOO_LARGE', wrapped)).toBe('MESSAGE_TOO_LARGE: send incomplete: the broker refused the records for t[2]: The request included a message larger than the max message size');
    expect(describeRefusal('MESSAGE_TOO_LARGE', new Error('MESSAGE_TOO_LARGE'))).toBe('MESSAGE_TOO_LARGE');
    expect(describeRefusal('MESSAGE_TOO_LARGE', undefined)).toBe('MESSAGE_TOO_LARGE');
  });
});
