import { Logger } from '@nestjs/common';
import { logLevel } from 'kafkajs';
import { nestLogCreator } from './logger';

describe('nestLogCreator', () => {
  const spies = () => ({
    error: jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined),
    warn: jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined),
    debug: jest.spyOn(Logger.prototype, 'debug').mockImplementation(() => undefined),
  });
  afterEach(() => jest.restoreAllMocks());
  const entry = (namespace: string, level: logLevel, message: string, extra: Record<string, unknown> = {}) =>
    ({ namespace, level, label: '', log: { timestamp: 'now', logger: 'kafkajs', message, ...extra } }) as never;

  it('logs an expected, retried answer of the broker at debug (after a crash restart: CONCURRENT_TRANSACTIONS on InitProducerId)', () => {
    const { error, debug } = spies();
    const log = nestLogCreator(logLevel.INFO);
    log(entry('Connection', logLevel.ERROR, 'Response InitProducerId(key: 22, version: 1)', { error: 'The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing', correlationId: 3 }));
    log(entry('Connection', logLevel.ERROR, 'Response FindCoordinator(key: 10, version: 2)', { error: "The coordinator is loading and hence can't process requests for this group", correlationId: 4 }));
    expect(error).not.toHaveBeenCalled();
    expect(debug).toHaveBeenCalledTimes(2);
  });

  it("drops KafkaJS's pause and resume lines (two per batch: each partition is paused while its worker runs), keeps its other info lines", () => {
    const log = jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
    const logger = nestLogCreator(logLevel.INFO);
    const topicPartitions = [{ topic: 'payments', partitions: [0] }];
    logger(entry('ConsumerGroup', logLevel.INFO, 'Pausing fetching from 1 topics', { topicPartitions }));
    logger(entry('ConsumerGroup', logLevel.INFO, 'Resuming fetching from 1 topics', { topicPartitions }));
    expect(log).not.toHaveBeenCalled();
    logger(entry('ConsumerGroup', logLevel.INFO, 'Consumer has joined the group', { groupId: 'g' }));
    expect(log).toHaveBeenCalledTimes(1);
  });

  it('keeps errors that are not answers to retry, and warnings, as they are', () => {
    const { error, warn } = spies();
    const log = nestLogCreator(logLevel.INFO);
    log(entry('Connection', logLevel.ERROR, 'Response Produce(key: 0, version: 7)', { error: 'Not authorized to access topics: [Topic authorization failed]' }));
    log(entry('Producer', logLevel.ERROR, 'Failed to send messages: Not authorized to access topics: [Topic authorization failed]', { retryCount: 0 }));
    log(entry('Producer', logLevel.WARN, 'something to see'));
    expect(error).toHaveBeenCalledTimes(2);
    expect(warn).toHaveBeenCalledTimes(1);
  });

  it('says a broker that cannot be reached once a minute per broker, as a warning without the stack; the repeats go to debug', () => {
    const { error, warn, debug } = spies();
    const now = jest.spyOn(Date, 'now').mockReturnValue(1_000_000);
    const log = nestLogCreator(logLevel.INFO);
    const refused = (broker: string) => entry('Connection', logLevel.ERROR, `Connection error: connect ECONNREFUSED ${broker}`, { broker, clientId: 'app', stack: 'Error: connect ECONNREFUSED\n    at TCPConnectWrap' });
    for (let i = 0; i < 5; i++) log(refused('127.0.0.1:9092'));
    log(entry('BrokerPool', logLevel.ERROR, 'Failed to connect to seed broker, trying another broker from the list: Connection error: connect ECONNREFUSED 127.0.0.1:9092', { retryCount: 2 }));
    log(refused('127.0.0.1:9093'));
    expect(error).not.toHaveBeenCalled();
    expect(warn).toHaveBeenCalledTimes(2);
    expect(warn.mock.calls.map((c) => String(c[0]))).toEqual([expect.stringContaining('9092'), expect.stringContaining('9093')]);
    expect(String(warn.mock.calls[0][0])).not.toContain('TCPConnectWrap');
    expect(debug).toHaveBeenCalledTimes(5);
    now.mockReturnValue(1_000_000 + 60000);
    log(refused('127.0.0.1:9092'));
    expect(warn).toHaveBeenCalledTimes(3);
  });

  it("leaves a consumer's crash to the library's own line (debug for KafkaJS's), and a member rejoining at warn", () => {
    const { error, warn, debug } = spies();
    const log = nestLogCreator(logLevel.INFO);
    log(entry('Consumer', logLevel.ERROR, "Crash: KafkaJSProtocolError: The coordinator is loading and hence can't process requests for this group", { groupId: 'g', stack: '...' }));
    log(entry('Consumer', logLevel.ERROR, 'Restarting the consumer in 300ms', { retryTime: 300, groupId: 'g' }));
    log(entry('Runner', logLevel.ERROR, 'The coordinator is not aware of this member, re-joining the group', { groupId: 'g' }));
    expect(error).not.toHaveBeenCalled();
    expect(debug).toHaveBeenCalledTimes(2);
    expect(warn).toHaveBeenCalledTimes(1);
  });
});
