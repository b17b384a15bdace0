import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** The SASL or TLS settings that were refused, as far as they can be named without the secret. */
export interface KafkaCredentials {
  brokers: string;
  sasl?: { mechanism: string; username?: string };
  ssl: boolean;
}

/**
 * Kafka refused this application's credentials (SASL) or its TLS handshake failed: thrown at boot instead of
 * retrying, since waiting does not fix a wrong password or certificate. The message names the brokers, the
 * mechanism and the user (never the password) and what to check.
 */
export class KafkaAuthenticationError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(
    readonly credentials: KafkaCredentials,
    cause: Error,
  ) {
    const who = credentials.sasl ? `SASL ${credentials.sasl.mechanism} as user "${credentials.sasl.username ?? '?'}"` : credentials.ssl ? 'TLS' : 'a plaintext connection';
    super(
      `Kafka at ${credentials.brokers} refused ${who}${credentials.ssl && credentials.sasl ? ' over TLS' : ''}: ${cause.message}. ` +
        `Check the module option kafka.sasl (mechanism, username, password) and kafka.ssl against the broker's listener and its users.`,
      { cause },
    );
  }

  /** The authentication failure in `err`'s cause chain, as this error; undefined when there is none. */
  static from(err: unknown, kafka: { brokers: unknown; sasl?: unknown; ssl?: unknown }): KafkaAuthenticationError | undefined {
    for (let e = err as { name?: string; code?: string; message?: string; cause?: unknown } | undefined, depth = 0; e && depth < 10; e = e.cause as typeof e, depth++) {
      const tls = typeof e.code === 'string' && (/^ERR_SSL_|^ERR_TLS_/.test(e.code) || TLS_CERTIFICATE_CODES.has(e.code));
      // KafkaJS wraps whatever fails during the SASL exchange in this error, a connection closed or a request
      // timed out mid-handshake too: those are waited out like any connection fault, not refusals.
      // The platformatic driver's refusal is KafkaSASLAuthenticationError (platformatic/producer-parts.ts).
      const refusedSasl = (e.name === 'KafkaJSSASLAuthenticationError' || e.name === 'KafkaSASLAuthenticationError') && !TRANSIENT.test(String(e.message ?? ''));
      if (refusedSasl || tls) {
        const sasl = kafka.sasl as { mechanism?: string; username?: string } | undefined;
        return new KafkaAuthenticationError(
          {
            brokers: Array.isArray(kafka.brokers) ? kafka.brokers.join(',') : '(brokers function)',
            sasl: sasl?.mechanism ? { mechanism: sasl.mechanism, username: sasl.username } : undefined,
            ssl: kafka.ssl !== undefined && kafka.ssl !== false,
          },
          e as Error,
        );
      }
    }
    return undefined;
  }
}

/** What a SASL exchange cut short by the network says (KafkaJS keeps only the message). */
const TRANSIENT = /connection (closed|error|timeout)|closed connection|socket|timed? ?out|timeout|ECONN|EPIPE|EHOSTUNREACH|ENOTFOUND|EAI_AGAIN|not connected|disconnected/i;

/** Node's certificate verification failures (a TLS listener whose certificate the client does not trust). */
const TLS_CERTIFICATE_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_HAS_EXPIRED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);
