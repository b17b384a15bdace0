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

/**
 * Sends KafkaJS's logs to Nest's Logger, one context per KafkaJS namespace. KafkaJS logs every error answer of
 * the broker at ERROR as it reads it (`Response InitProducerId ...`), also the ones that are expected and
 * retried: CONCURRENT_TRANSACTIONS while a restarted producer's earlier transaction is being aborted, the
 * coordinator loading after a broker restart, a leader that moved. Those go to debug here; an error that is
 * not an answer to retry stays an error, and a retry that gives up is reported by whoever asked.
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
    const text = Object.keys(extra).length > 0 ? `${message} ${JSON.stringify(extra)}` : message;
    const retriedAnswer = level === logLevel.ERROR && namespace === 'Connection' && message.startsWith('Response ') && typeof extra.error === 'string' && expected.has(extra.error);
    if (retriedAnswer) logger.debug(text);
    else if (level === logLevel.ERROR) logger.error(text);
    else if (level === logLevel.WARN) logger.warn(text);
    else if (level === logLevel.INFO) logger.log(text);
    else logger.debug(text);
  };
};
