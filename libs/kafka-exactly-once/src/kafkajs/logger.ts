import { Logger } from '@nestjs/common';
import { logLevel, type logCreator } from 'kafkajs';

/**
 * The messages of the Kafka errors that are answers to wait for and ask again (KafkaJS's `retriable` errors, and
 * CONCURRENT_TRANSACTIONS, which the broker means to be retried): the one who asked (KafkaJS or the library)
 * does so, and reports for itself if it gives up.
 */
function expectedAnswers(): Set<string> {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { errorCodes } = require('kafkajs/src/protocol/error') as { errorCodes: Array<{ type: string; retriable: boolean; message: string }> };
    return new Set(errorCodes.filter((e) => e.retriable || e.type === 'CONCURRENT_TRANSACTIONS').map((e) => e.message));
  } catch {
    return new Set();
  }
}

/** KafkaJS's errors for a broker that cannot be reached (refused, reset, timed out, not resolved). */
const CONNECTION_FAILURE = /^(Connection error|Failed to connect to seed broker|Connection timeout)/;

/** When each unreachable broker was last said at warn level, across the application's KafkaJS clients. */
const unreachableSaid = new Map<string, number>();

/**
 * Sends KafkaJS's logs to Nest's Logger, one context per KafkaJS namespace. KafkaJS logs every error answer of
 * the broker at ERROR as it reads it (`Response InitProducerId ...`), also the ones that are expected and
 * retried: CONCURRENT_TRANSACTIONS while a restarted producer's earlier transaction is being aborted, the
 * coordinator loading after a broker restart, a leader that moved. Those go to debug here; an error that is
 * not an answer to retry stays an error, and a retry that gives up is reported by whoever asked.
 *
 * KafkaJS's own lines for a consumer crash (`Crash: …`, `Restarting the consumer in …`) go to debug: the
 * library's consumer says each crash once, at warn when KafkaJS restarts it after an error the broker means to
 * be retried (a coordinator loading after a broker restart), at error otherwise. A member the coordinator
 * forgot (after a broker restart or a session timeout) rejoining is a warning.
 *
 * KafkaJS's info lines for pausing and resuming a partition are dropped: the library pauses each partition while
 * its worker runs a batch (ExactlyOnceConsumer.onBatch), two lines per batch; it says its own backoffs itself.
 *
 * While a broker is away, KafkaJS logs an ERROR with a stack trace for every connection attempt of every
 * client (`Connection error: connect ECONNREFUSED`, `Failed to connect to seed broker`), several a second. The
 * library says itself what an outage means (the consumer waits, the publisher spools, health is down): here
 * the first such error of a broker is one warning without the stack, and the next ones in the same minute go
 * to debug.
 */
export const nestLogCreator: logCreator = () => {
  const loggers = new Map<string, Logger>();
  const expected = expectedAnswers();
  return ({ namespace, level, log }) => {
    const context = `kafkajs${namespace ? `:${namespace}` : ''}`;
    let logger = loggers.get(context);
    if (!logger) {
      logger = new Logger(context);
      loggers.set(context, logger);
    }
    const { message, timestamp: _timestamp, logger: _name, ...extra } = log as Record<string, unknown> & { message: string };
    // The library pauses each partition while its worker runs a batch: two lines per batch, nothing to read.
    if (level === logLevel.INFO && namespace === 'ConsumerGroup' && (message.startsWith('Pausing fetching') || message.startsWith('Resuming fetching'))) return;
    const unreachable = level === logLevel.ERROR && CONNECTION_FAILURE.test(message);
    if (unreachable) delete extra.stack;
    const text = Object.keys(extra).length > 0 ? `${message} ${JSON.stringify(extra)}` : message;
    const retriedAnswer = level === logLevel.ERROR && namespace === 'Connection' && message.startsWith('Response ') && typeof extra.error === 'string' && expected.has(extra.error);
    // The library's consumer reports each crash itself, with what happens next (ExactlyOnceConsumer).
    const crashReported = namespace === 'Consumer' && (message.startsWith('Crash: ') || message.startsWith('Restarting the consumer in '));
    const rejoin = namespace === 'Runner' && message.startsWith('The coordinator is not aware of this member');
    if (crashReported) logger.debug(text);
    else if (rejoin) logger.warn(text);
    else if (unreachable) {
      const broker = String(/(\S+:\d+)\s*$/.exec(message)?.[1] ?? extra.broker ?? 'seed');
      const now = Date.now();
      if (now - (unreachableSaid.get(broker) ?? -Infinity) >= 60000) {
        unreachableSaid.set(broker, now);
        logger.warn(`${text} (said once a minute while it lasts; the next ones at debug)`);
      } else logger.debug(text);
    } else if (retriedAnswer) logger.debug(text);
    else if (level === logLevel.ERROR) logger.error(text);
    else if (level === logLevel.WARN) logger.warn(text);
    else if (level === logLevel.INFO) logger.log(text);
    else logger.debug(text);
  };
};
