import { KafkaAuthenticationError } from './kafka-authentication.error';

const kafka = { brokers: ['b1:9096', 'b2:9096'], sasl: { mechanism: 'scram-sha-256', username: 'svc', password: 'secret-pw' } };

function saslError(message: string): Error {
  const err = new Error(message);
  err.name = 'KafkaJSSASLAuthenticationError';
  return err;
}

describe('KafkaAuthenticationError.from', () => {
  it('finds a SASL refusal anywhere in the cause chain and names brokers, mechanism and user, never the password', () => {
    const wrapped = new Error('consumer start failed', { cause: new Error('connect failed', { cause: saslError('SASL SCRAM SHA256 authentication failed') }) });
    const err = KafkaAuthenticationError.from(wrapped, kafka);
    expect(err).toBeInstanceOf(KafkaAuthenticationError);
    expect(err?.retriable).toBe(false);
    expect(err?.message).toMatch(/^Kafka at b1:9096,b2:9096 refused SASL scram-sha-256 as user "svc": SASL SCRAM SHA256 authentication failed\. Check/);
    expect(err?.message).not.toContain('secret-pw');
    expect(err?.credentials).toEqual({ brokers: 'b1:9096,b2:9096', sasl: { mechanism: 'scram-sha-256', username: 'svc' }, ssl: false });
  });

  it('takes a TLS handshake or certificate failure for one, and says TLS', () => {
    const tls = Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
    expect(KafkaAuthenticationError.from(tls, { brokers: ['b:9093'], ssl: true })?.message).toMatch(/refused TLS: self-signed certificate/);
    const handshake = Object.assign(new Error('wrong version number'), { code: 'ERR_SSL_WRONG_VERSION_NUMBER' });
    expect(KafkaAuthenticationError.from(handshake, { brokers: ['b:9093'], ssl: true })).toBeInstanceOf(KafkaAuthenticationError);
  });

  it('leaves every other failure alone: a broker that is down is waited for', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9092'), { name: 'KafkaJSConnectionError', code: 'ECONNREFUSED' });
    expect(KafkaAuthenticationError.from(refused, kafka)).toBeUndefined();
    expect(KafkaAuthenticationError.from(undefined, kafka)).toBeUndefined();
    expect(KafkaAuthenticationError.from('a string', kafka)).toBeUndefined();
  });
});
