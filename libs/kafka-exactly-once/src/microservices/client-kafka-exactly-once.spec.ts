import { lastValueFrom } from 'rxjs';
import { EventPublisher } from '../publishing/event-publisher';
import { RequestResponseNotSupportedError } from '../errors/request-response-not-supported.error';
import { ClientKafkaExactlyOnce } from './client-kafka-exactly-once';

/** A client over a publisher that only records what it is asked to publish. */
function client() {
  const publisher = Object.create(EventPublisher.prototype) as EventPublisher;
  const publish = jest.fn(async (_topic: string, _event: unknown, options?: { messageId?: string }) => ({ status: 'sent', messageId: options?.messageId ?? 'id-1' }));
  (publisher as unknown as { publish: typeof publish }).publish = publish;
  return { client: new ClientKafkaExactlyOnce({ publisher }), publish };
}

describe('ClientKafkaExactlyOnce', () => {
  it('publishes an event as it is, or the value of a record with its key, headers and message id', async () => {
    const { client: c, publish } = client();
    await lastValueFrom(c.emit('refunds', { refundId: 'r-1', account: 'a' }));
    await lastValueFrom(c.emit('refunds', { value: { refundId: 'r-2' }, key: 'a', headers: { h: '1' }, messageId: 'm-2' }));
    expect(publish.mock.calls).toEqual([
      ['refunds', { refundId: 'r-1', account: 'a' }],
      ['refunds', { refundId: 'r-2' }, { key: 'a', headers: { h: '1' }, messageId: 'm-2' }],
    ]);
  });

  it('refuses a record that keeps partition or timestamp from a ClientKafka call site, naming the field, instead of writing the wrapper as the event', async () => {
    const { client: c, publish } = client();
    await expect(lastValueFrom(c.emit('refunds', { key: 'a', value: { refundId: 'r-1' }, partition: 1 }))).rejects.toThrow(/"partition" of Nest's Kafka record is not supported here/);
    await expect(lastValueFrom(c.emit('refunds', { value: { refundId: 'r-1' }, timestamp: '1700000000000' }))).rejects.toThrow(/"timestamp" of Nest's Kafka record/);
    expect(publish).not.toHaveBeenCalled();
  });

  it('takes an event with other fields beside partition or timestamp as the event itself', async () => {
    const { client: c, publish } = client();
    const event = { value: 5, partition: 2, reading: 'pressure' };
    await lastValueFrom(c.emit('readings', event));
    expect(publish.mock.calls).toEqual([['readings', event]]);
  });

  it('refuses send (request-response)', async () => {
    const { client: c } = client();
    await expect(lastValueFrom(c.send('refunds'))).rejects.toThrow(RequestResponseNotSupportedError);
  });
});
