import type { ModuleMetadata } from '@nestjs/common';
import { ClientProxy, ClientsProviderAsyncOptions, ReadPacket, WritePacket } from '@nestjs/microservices';
import { Observable, throwError } from 'rxjs';
import { RequestResponseNotSupportedError } from '../errors/request-response-not-supported.error';
import { EventPublisher } from '../publishing/event-publisher';
import type { PublishOptions, PublishResult } from '../publishing/publish.interfaces';

/** An event with its record options, for `client.emit(topic, { value, key, headers, messageId })`. */
export interface KafkaExactlyOnceRecord<T = unknown> extends PublishOptions {
  value: T;
}

const RECORD_FIELDS = new Set(['value', 'key', 'headers', 'messageId']);
/** Fields of Nest's own Kafka record (`ClientKafka.emit`) that this client cannot honour: the library picks the partition and the time. */
const NEST_ONLY_RECORD_FIELDS = ['partition', 'timestamp'];

/** `{ value, key?, headers?, messageId? }` and nothing else: the shape Nest's Kafka client takes too. */
function isRecord(data: unknown): data is KafkaExactlyOnceRecord {
  if (data === null || typeof data !== 'object' || Array.isArray(data) || !('value' in data)) return false;
  return Object.keys(data).every((field) => RECORD_FIELDS.has(field));
}

/**
 * The field of Nest's record shape (`partition`, `timestamp`) a call site kept from ClientKafka, when `data` is
 * that shape and nothing else. Taken as the event itself, the wrapper would be written as the value of a JSON
 * topic (whose events are any object) or fail with a misleading error: it is refused, naming the field.
 */
function nestOnlyField(data: unknown): string | undefined {
  if (data === null || typeof data !== 'object' || Array.isArray(data) || !('value' in data)) return undefined;
  const fields = Object.keys(data);
  if (!fields.every((field) => RECORD_FIELDS.has(field) || NEST_ONLY_RECORD_FIELDS.includes(field))) return undefined;
  return fields.find((field) => NEST_ONLY_RECORD_FIELDS.includes(field));
}

export interface ClientKafkaExactlyOnceOptions {
  publisher: EventPublisher;
}

/**
 * A Nest `ClientProxy` over the module's EventPublisher: `client.emit(topic, event)` validates the event against
 * the topic's schema, gives it a message id and publishes it through the circuit breaker and the durable spool;
 * its Observable emits the `PublishResult` (`sent`, or `spooled` while Kafka is away: it is delivered later) and
 * completes. The key comes from the topic's key function (module option `topics`), or is given with the event:
 * `client.emit(topic, { value: event, key, headers, messageId })`. `client.send()` (request-response) is refused.
 *
 * @example
 * ClientsModule.registerAsync([clientKafkaExactlyOnce('PAYMENTS')])
 * // with KafkaExactlyOnceModule.forRoot({ isGlobal: true, publisher: {...}, ... })
 * constructor(@Inject('PAYMENTS') private readonly payments: ClientProxy) {}
 * await lastValueFrom(this.payments.emit('payments.requested', { value: payment, key: payment.accountId }));
 */
export class ClientKafkaExactlyOnce extends ClientProxy {
  private readonly publisher: EventPublisher;

  constructor(options: ClientKafkaExactlyOnceOptions) {
    super();
    if (!(options?.publisher instanceof EventPublisher)) {
      throw new TypeError('ClientKafkaExactlyOnce needs the module\'s EventPublisher: register it with clientKafkaExactlyOnce(name) (ClientsModule.registerAsync)');
    }
    this.publisher = options.publisher;
  }

  /** The module owns the publisher's connection: nothing to open. */
  async connect(): Promise<void> {}

  /** The module drains and closes the publisher at shutdown. */
  close(): void {}

  unwrap<T>(): T {
    return this.publisher as T;
  }

  override send<TResult = unknown>(pattern: unknown): Observable<TResult> {
    return throwError(() => new RequestResponseNotSupportedError(`client.send(${JSON.stringify(pattern)})`));
  }

  protected publish(packet: ReadPacket, callback: (packet: WritePacket) => void): () => void {
    callback({ err: new RequestResponseNotSupportedError(`client.send(${JSON.stringify(packet.pattern)})`), isDisposed: true });
    return () => undefined;
  }

  protected async dispatchEvent<T = PublishResult>(packet: ReadPacket): Promise<T> {
    const topic = packet.pattern as unknown;
    if (typeof topic !== 'string' || topic.length === 0) {
      throw new TypeError(`client.emit needs the topic as its pattern, a non-empty string (got ${JSON.stringify(topic)})`);
    }
    const data = packet.data as unknown;
    const unsupported = nestOnlyField(data);
    if (unsupported !== undefined) {
      throw new TypeError(`client.emit(${JSON.stringify(topic)}, { value, ${unsupported}, ... }): "${unsupported}" of Nest's Kafka record is not supported here (the library's producer chooses it); leave it out, and give the key as "key"`);
    }
    if (isRecord(data)) {
      const { value, ...options } = data;
      return (await this.publisher.publish(topic, value, options)) as T;
    }
    return (await this.publisher.publish(topic, data)) as T;
  }
}

/**
 * The `ClientsModule.registerAsync` entry of a ClientKafkaExactlyOnce named `name`. It injects the module's
 * EventPublisher, so KafkaExactlyOnceModule must be visible there: `forRoot({ isGlobal: true, ... })`, or the
 * same `forRoot(...)` module given in `imports`.
 */
export function clientKafkaExactlyOnce(name: string | symbol, imports: ModuleMetadata['imports'] = []): ClientsProviderAsyncOptions {
  return {
    name,
    imports,
    inject: [EventPublisher],
    useFactory: (publisher: EventPublisher) => ({ customClass: ClientKafkaExactlyOnce, options: { publisher } }),
  };
}
