import { UNENCODABLE_RECORD } from '../kafkajs';

export { UNENCODABLE_RECORD };

/**
 * Kafka error types with which a broker refuses records for good: sending the same record again, to any
 * broker, after any wait, gets the same answer. UNKNOWN_TOPIC_OR_PARTITION is not among them: KafkaJS and the
 * broker report it while metadata is still settling, so the publisher asks the cluster (TopicInspector) before
 * it believes that a topic is missing. Nor is TOPIC_AUTHORIZATION_FAILED: an operator fixes an ACL, and the
 * spooled events must still be there then (they wait, and the spool's age shows in health). The same for
 * refusals that concern every record of a topic or cluster (UNSUPPORTED_FOR_MESSAGE_FORMAT, INVALID_REQUIRED_ACKS):
 * configuration an operator fixes, not records to set aside.
 */
export const REFUSED_FOR_GOOD = new Set([
  UNENCODABLE_RECORD,
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_RECORD',
  'INVALID_TOPIC_EXCEPTION',
]);

interface KafkaJsLikeError {
  name?: string;
  type?: string;
  message?: string;
  cause?: unknown;
  originalError?: unknown;
}

/**
 * The Kafka error type by which the broker refused a send for good, looking through the wrappers KafkaJS puts
 * around it (KafkaJSNonRetriableError, KafkaJSNumberOfRetriesExceeded: `cause` / `originalError`); undefined
 * for anything that may pass (connection lost, timeouts, leader changes, out-of-order sequence...).
 */
export function refusedForGood(err: unknown): string | undefined {
  const seen = new Set<unknown>();
  for (let current = err as KafkaJsLikeError | undefined; current && typeof current === 'object' && !seen.has(current); ) {
    seen.add(current);
    if (current.type && REFUSED_FOR_GOOD.has(current.type)) return current.type;
    current = (current.cause ?? current.originalError) as KafkaJsLikeError | undefined;
  }
  return undefined;
}

/**
 * A refusal as one line for logs and health: the Kafka error type first, then what was said of it, the type not
 * said twice (an error of a driver other than KafkaJS names it in its message, and a wrapper's message carries it).
 */
export function describeRefusal(type: string, err: unknown): string {
  const message = (err as Error | undefined)?.message;
  if (!message || message === type) return type;
  if (message.startsWith(type)) return message;
  return `${type}: ${message.split(`${type}: `).join('')}`;
}
