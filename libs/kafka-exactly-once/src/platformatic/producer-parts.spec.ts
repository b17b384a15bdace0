import { isConnectionFault, isFencedError, isKafkaUnavailable } from '../engine/error-classification';
import { KafkaAuthenticationError } from '../errors/kafka-authentication.error';
import { KafkaConnectionError, KafkaProtocolError } from '../client/kafka-errors';
import { kafkaError, KafkaSaslAuthenticationError } from './producer-parts';

/** The client's errors as @platformatic/kafka 2.12 builds them (errors.js): codes, and inner errors in `errors`. */
const protocol = (apiId: string, apiCode: number, canRetry: boolean) => Object.assign(new Error(`${apiId} message`), { code: 'PLT_KFK_PROTOCOL', apiId, apiCode, canRetry });
const response = (...errors: Error[]) => Object.assign(new AggregateError(errors, 'Received response with error while executing API'), { code: 'PLT_KFK_RESPONSE', response: {} });
const network = (cause: object) => Object.assign(new Error('Connection to 127.0.0.1:9092 failed.'), { code: 'PLT_KFK_NETWORK', canRetry: true, cause });
const multiple = (...errors: Error[]) => Object.assign(new AggregateError(errors, 'Cannot connect to any broker.'), { code: 'PLT_KFK_MULTIPLE' });

describe("kafkaError: the platformatic client's failures as the library classifies them", () => {
  it("names the broker's error code, not OPERATION_NOT_ATTEMPTED, which only says another one stopped the request", () => {
    const err = kafkaError(response(protocol('OPERATION_NOT_ATTEMPTED', 55, false), protocol('CONCURRENT_TRANSACTIONS', 51, true)));
    expect(err).toBeInstanceOf(KafkaProtocolError);
    expect(err).toMatchObject({ type: 'CONCURRENT_TRANSACTIONS', code: 51, retriable: true });
    expect(isKafkaUnavailable(err)).toBe(true);
  });

  it('a fenced producer is fenced (the engine stops the partition), and a refusal for good is not retried', () => {
    expect(isFencedError(kafkaError(response(protocol('PRODUCER_FENCED', 90, false))))).toBe(true);
    expect(isFencedError(kafkaError(protocol('INVALID_PRODUCER_EPOCH', 47, false)))).toBe(true);
    const tooLarge = kafkaError(response(protocol('MESSAGE_TOO_LARGE', 10, false)));
    expect(isKafkaUnavailable(tooLarge)).toBe(false);
    expect(isConnectionFault(tooLarge)).toBe(false); // the record's: MESSAGE_TOO_LARGE
    expect(isConnectionFault(kafkaError(response(protocol('TRANSACTIONAL_ID_AUTHORIZATION_FAILED', 53, false))))).toBe(true); // the configuration's
  });

  it('no broker answering (the pool tried each one) is a connection fault: waited out, no record blamed', () => {
    const err = kafkaError(multiple(network({ code: 'ECONNREFUSED' }), network({ code: 'ECONNREFUSED' })));
    expect(err).toBeInstanceOf(KafkaConnectionError);
    expect(isKafkaUnavailable(err)).toBe(true);
    expect(isConnectionFault(err)).toBe(true);
    expect(isConnectionFault(kafkaError(Object.assign(new Error('Request timed out'), { code: 'PLT_KFK_TIMEOUT' })))).toBe(true);
  });

  it('refused credentials are reported at boot, as on KafkaJS, not waited out', () => {
    // The client's shape: the connection's NetworkError, caused by an AuthenticationError, caused by the answer.
    const refused = Object.assign(new Error('SASL authentication failed.'), { code: 'PLT_KFK_AUTHENTICATION', cause: response(protocol('SASL_AUTHENTICATION_FAILED', 58, false)) });
    const err = kafkaError(multiple(network(refused)));
    expect(err).toBeInstanceOf(KafkaSaslAuthenticationError);
    expect(KafkaAuthenticationError.from(err, { brokers: ['127.0.0.1:9096'], sasl: { mechanism: 'scram-sha-256', username: 'app', password: 'x' } })?.message).toContain('SASL scram-sha-256 as user "app"');
  });

  it('a TLS handshake that fails is found through the connection error (its code)', () => {
    const err = kafkaError(multiple(network({ code: 'ERR_TLS_CERT_ALTNAME_INVALID', message: 'Hostname/IP does not match' })));
    expect(KafkaAuthenticationError.from(err, { brokers: ['127.0.0.1:9097'], ssl: true })).toBeInstanceOf(KafkaAuthenticationError);
  });

  it('anything else stays as it is', () => {
    const bug = new TypeError('x is not a function');
    expect(kafkaError(bug)).toBe(bug);
  });
});
