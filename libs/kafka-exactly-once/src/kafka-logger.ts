import { Logger } from '@nestjs/common';
import { logLevel, type logCreator } from 'kafkajs';

/** Sends KafkaJS's logs to Nest's Logger, one context per KafkaJS namespace. */
export const nestLogCreator: logCreator = () => {
  const loggers = new Map<string, Logger>();
  return ({ namespace, level, log }) => {
    const context = `kafkajs${namespace ? `:${namespace}` : ''}`;
    let logger = loggers.get(context);
    if (!logger) {
      logger = new Logger(context);
      loggers.set(context, logger);
    }
    const { message, timestamp: _timestamp, logger: _name, ...extra } = log as Record<string, unknown> & { message: string };
    const text = Object.keys(extra).length > 0 ? `${message} ${JSON.stringify(extra)}` : message;
    if (level === logLevel.ERROR) logger.error(text);
    else if (level === logLevel.WARN) logger.warn(text);
    else if (level === logLevel.INFO) logger.log(text);
    else logger.debug(text);
  };
};
