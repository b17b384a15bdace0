import { Injectable, Scope } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { mkdtempSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { IdempotentHandler } from './decorators/idempotent-handler.decorator';
import { OrderedEvent } from './decorators/ordered-event.decorator';
import { HandlerRegistrationError } from './errors/handler-registration.error';
import { InvalidOptionsError } from './errors/invalid-options.error';
import { KafkaExactlyOnceExplorer } from './kafka-exactly-once.explorer';
import { KafkaExactlyOnceModule } from './kafka-exactly-once.module';

const schemas = mkdtempSync(join(tmpdir(), 'keo-explorer-'));
writeFileSync(join(schemas, 'ping.avsc'), JSON.stringify({ type: 'record', name: 'Ping', namespace: 't', fields: [{ name: 'n', type: 'int' }] }));

@Injectable()
class PingHandler {
  @IdempotentHandler({ topic: 'pings', schema: 't.Ping', retry: { attempts: 5 } })
  onPing() {}
}

@Injectable()
class OtherPingHandler {
  @IdempotentHandler({ topic: 'pings', schema: 't.Ping' })
  alsoPing() {}
}

@Injectable()
class UnknownSchemaHandler {
  @IdempotentHandler({ topic: 'pongs', schema: 't.Pong' })
  onPong() {}
}

@Injectable()
class OrderedPingHandler {
  @IdempotentHandler({ topic: 'pings', schema: 't.Ping' })
  @OrderedEvent({ key: (e: { n: number }) => e.n })
  onPing() {}
}

@Injectable()
class LanesPingHandler {
  @IdempotentHandler({ topic: 'pings', schema: 't.Ping' })
  @OrderedEvent({ lanes: 16 })
  onPing() {}
}

@Injectable()
class LanesBatchHandler {
  @IdempotentHandler({ topic: 'pings', schema: 't.Ping', batch: true })
  @OrderedEvent({ lanes: 4 })
  onPings() {}
}

@Injectable()
class RecordingBatchHandler {
  readonly seen: Array<{ db: unknown; attempt: number; events: number }> = [];

  @IdempotentHandler({ topic: 'pings', schema: 't.Ping', batch: true })
  async onPings(events: unknown[], batch: { db: unknown; attempt: number }) {
    this.seen.push({ db: batch.db, attempt: batch.attempt, events: events.length });
  }
}

@Injectable()
class OrderedWithoutHandler {
  @OrderedEvent()
  onPing() {}
}

@Injectable()
class UndefinedRetryHandler {
  @IdempotentHandler({ topic: 'pings', schema: 't.Ping', retry: { attempts: undefined, maxDelayMs: 50 } })
  onPing() {}
}

@Injectable()
class ZeroAttemptsHandler {
  @IdempotentHandler({ topic: 'pings', schema: 't.Ping', retry: { attempts: 0 } })
  onPing() {}
}

@Injectable()
class LongRetryHandler {
  @IdempotentHandler({ topic: 'pings', schema: 't.Ping', retry: { attempts: 20, initialDelayMs: 1000, maxDelayMs: 60000 } })
  onPing() {}
}

@Injectable()
class RetryTopicsHandler {
  @IdempotentHandler({ topic: 'pings', schema: 't.Ping', retry: { attempts: 5 }, retryTopics: { delays: ['10s', '1m'], maxInPlaceAttempts: 2 } })
  onPing() {}
}

@Injectable()
class OrderedRetryTopicsHandler {
  @IdempotentHandler({ topic: 'pings', schema: 't.Ping', retryTopics: { delays: ['10s'] } })
  @OrderedEvent()
  onPing() {}
}

@Injectable()
class BadDelayHandler {
  @IdempotentHandler({ topic: 'pings', schema: 't.Ping', retryTopics: { delays: ['soon'] } })
  onPing() {}
}

@Injectable()
class ZeroInPlaceHandler {
  @IdempotentHandler({ topic: 'pings', schema: 't.Ping', retryTopics: { delays: ['1s'], maxInPlaceAttempts: 0 } })
  onPing() {}
}

@Injectable()
class TierTopicHandler {
  @IdempotentHandler({ topic: 'pings.retry.1', schema: 't.Ping' })
  onPing() {}
}

@Injectable({ scope: Scope.REQUEST })
class RequestScopedHandler {
  @IdempotentHandler({ topic: 'pings', schema: 't.Ping' })
  onPing() {}
}

function moduleWith(providers: unknown[], extra: object = {}) {
  return Test.createTestingModule({
    imports: [
      KafkaExactlyOnceModule.forRoot({
        kafka: { clientId: 't', brokers: ['127.0.0.1:1'] },
        groupId: 'g',
        transactionalIdPrefix: 't',
        schemas: { directory: schemas },
        topicPrefix: 'env.',
        autoStart: false,
        ...extra,
      }),
    ],
    providers: providers as never[],
  }).compile();
}

describe('KafkaExactlyOnceExplorer', () => {
  it('finds decorated methods, with the topic prefix and the merged retry policy', async () => {
    const moduleRef = await moduleWith([PingHandler]);
    const [handler, ...rest] = moduleRef.get(KafkaExactlyOnceExplorer).explore();
    expect(rest).toEqual([]);
    expect(handler).toMatchObject({ name: 'PingHandler.onPing', topic: 'env.pings', retry: { attempts: 5, initialDelayMs: 100 } });
    expect(handler.reader.schema!.name).toBe('t.Ping');
  });

  it("holds a handler's own retry policy to the module's rules: a field left undefined keeps the module's value", async () => {
    const [handler] = (await moduleWith([UndefinedRetryHandler])).get(KafkaExactlyOnceExplorer).explore();
    expect(handler.retry).toEqual({ attempts: 3, initialDelayMs: 100, maxDelayMs: 50, multiplier: 2 });
    await expect(moduleWith([ZeroAttemptsHandler]).then((m) => m.init())).rejects.toThrow(
      /ZeroAttemptsHandler\.onPing: @IdempotentHandler option "retry\.attempts" must be an integer >= 1, got 0/,
    );
    // Waits between attempts happen inside the unit of work's transaction: they must end before PostgreSQL ends it.
    await expect(moduleWith([LongRetryHandler]).then((m) => m.init())).rejects.toThrow(/LongRetryHandler\.onPing: .*must stay below inbox\.idleInTransactionTimeoutMs \(30000\)/);
  });

  it('refuses two handlers for one topic at boot', async () => {
    const moduleRef = await moduleWith([PingHandler, OtherPingHandler]);
    await expect(moduleRef.init()).rejects.toThrow(HandlerRegistrationError);
    await expect(moduleWith([PingHandler, OtherPingHandler]).then((m) => m.init())).rejects.toThrow(/topic "env.pings" already has a handler in group "g"/);
  });

  it('refuses a handler whose schema is not in the schemas directory', async () => {
    await expect(moduleWith([UnknownSchemaHandler]).then((m) => m.init())).rejects.toThrow(/schema "t.Pong" cannot be read: it is not in the schemas directory/);
  });

  it('refuses request-scoped handlers', async () => {
    await expect(moduleWith([RequestScopedHandler]).then((m) => m.init())).rejects.toThrow(/request- or transient-scoped/);
  });

  it('refuses an output topic whose schema is unknown', async () => {
    await expect(moduleWith([PingHandler], { topics: { out: { schema: 't.Nope' } } }).then((m) => m.init())).rejects.toThrow(InvalidOptionsError);
  });

  it('refuses bad options at boot, naming the field', async () => {
    await expect(moduleWith([PingHandler], { groupId: '' })).rejects.toThrow(/option "groupId" is required/);
  });

  it('reads @OrderedEvent: its key function, or none for the record key', async () => {
    const [ordered] = (await moduleWith([OrderedPingHandler])).get(KafkaExactlyOnceExplorer).explore();
    expect(ordered.ordering?.key?.({ n: 7 })).toBe(7);
    const [plain] = (await moduleWith([PingHandler])).get(KafkaExactlyOnceExplorer).explore();
    expect(plain.ordering).toBeUndefined();
    expect(ordered.ordering?.lanes).toBe(1);
  });

  it('reads key lanes, and refuses them on a batch handler', async () => {
    const [lanes] = (await moduleWith([LanesPingHandler])).get(KafkaExactlyOnceExplorer).explore();
    expect(lanes.ordering).toEqual({ key: undefined, lanes: 16 });
    await expect(moduleWith([LanesBatchHandler]).then((m) => m.init())).rejects.toThrow(/@OrderedEvent\(\{ lanes \}\) is for handlers called once per event/);
  });

  it("hands a batch handler's batch of one the event's ctx.db, and reads ctx.manager only when the handler does", async () => {
    const moduleRef = await moduleWith([RecordingBatchHandler]);
    const [handler] = moduleRef.get(KafkaExactlyOnceExplorer).explore();
    const db = { kind: 'the unit\'s data layer' };
    // ctx of a data layer other than TypeORM: its manager throws when read.
    const ctx = {
      db,
      get manager(): never {
        throw new TypeError('ctx.manager is TypeORM\'s EntityManager, and this module\'s data layer is prisma');
      },
      attempt: 2,
    };
    await handler.invoke({ n: 1 }, ctx as never);
    expect(moduleRef.get(RecordingBatchHandler).seen).toEqual([{ db, attempt: 2, events: 1 }]);
  });

  it('reads retry topics: a topic per tier, the in-place attempts of each stage', async () => {
    const [handler] = (await moduleWith([RetryTopicsHandler])).get(KafkaExactlyOnceExplorer).explore();
    expect(handler.retryTopics).toMatchObject({ topics: ['env.pings.retry.1', 'env.pings.retry.2'], delaysMs: [10000, 60000] });
    expect(handler.retry.attempts).toBe(2);
  });

  it('refuses retry topics with @OrderedEvent, bad delays and attempts, and a handler of a tier topic', async () => {
    await expect(moduleWith([OrderedRetryTopicsHandler]).then((m) => m.init())).rejects.toThrow(/retryTopics and @OrderedEvent cannot go together: a record waiting on a retry topic lets later records of its key overtake it/);
    await expect(moduleWith([BadDelayHandler]).then((m) => m.init())).rejects.toThrow(/BadDelayHandler\.onPing: @IdempotentHandler option "retryTopics\.delays\[0\]" must be a number of ms or text like/);
    await expect(moduleWith([ZeroInPlaceHandler]).then((m) => m.init())).rejects.toThrow(/option "retryTopics\.maxInPlaceAttempts" must be an integer >= 1, got 0/);
    await expect(moduleWith([RetryTopicsHandler, TierTopicHandler]).then((m) => m.init())).rejects.toThrow(/topic "env\.pings\.retry\.1" already has a handler in group "g" \(RetryTopicsHandler\.onPing, as a retry topic\)/);
    expect(() => IdempotentHandler({ topic: 'x', schema: 't.Ping', retryTopics: { delays: '10s' as never } })).toThrow(/"retryTopics" needs the delay of each tier/);
  });

  it('refuses @OrderedEvent without @IdempotentHandler', async () => {
    await expect(moduleWith([OrderedWithoutHandler]).then((m) => m.init())).rejects.toThrow(/@OrderedEvent needs @IdempotentHandler on the same method/);
  });

  it('checks decorator arguments when applied', () => {
    expect(() => OrderedEvent({ key: 'accountId' as never })).toThrow(/needs a function of the event/);
    expect(() => OrderedEvent(null as never)).toThrow(/takes an options object/);
    for (const lanes of [0, -1, 2.5, 257, Number.NaN, '8' as never]) expect(() => OrderedEvent({ lanes })).toThrow(/lanes \}\) needs a whole number from 1 to 256/);
    expect(() => OrderedEvent({ lanes: 256 })).not.toThrow();
    expect(() => IdempotentHandler({ topic: '', schema: 't.Ping' })).toThrow(/needs a topic/);
    expect(() => IdempotentHandler({ topic: 'x', schema: '' })).toThrow(/"schema" must be the full name of an Avro record/);
    expect(() => IdempotentHandler({ topic: 'x', format: 'xml' as never })).toThrow(/"format" must be one of 'avro', 'json', 'protobuf'/);
    expect(() => IdempotentHandler({ topic: 'x', format: 'json', validate: {} as never })).toThrow(/"validate" must be a DTO class/);
    expect(() => IdempotentHandler({ topic: 'x', format: 'json', validate: class Dto {} })).not.toThrow();
    expect(() => IdempotentHandler({ topic: 'x', format: 'json', registryFraming: 'no' as never })).toThrow(/"registryFraming" must be true or false/);
  });

  it("reads a JSON topic as plain JSON only when the handler or the topic says so, and refuses registryFraming where it means nothing", async () => {
    @Injectable()
    class PlainHandler {
      @IdempotentHandler({ topic: 'plain.in', format: 'json', registryFraming: false })
      async onPlain(): Promise<void> {}

      @IdempotentHandler({ topic: 'declared.in', format: 'json' })
      async onDeclared(): Promise<void> {}

      @IdempotentHandler({ topic: 'framed.in', format: 'json' })
      async onFramed(): Promise<void> {}
    }
    @Injectable()
    class AvroPlainHandler {
      @IdempotentHandler({ topic: 'pings', schema: 't.Ping', registryFraming: false })
      async on(): Promise<void> {}
    }
    const registry = { schemaRegistry: { url: 'http://127.0.0.1:1', requestTimeoutMs: 200 } };
    const moduleRef = await moduleWith([PlainHandler], { ...registry, topics: { 'declared.in': { format: 'json', registryFraming: false } } });
    await moduleRef.init();
    const readers = moduleRef.get(KafkaExactlyOnceExplorer).explore().map((h) => [h.name, h.reader.readsRegistry, h.reader.describe]);
    expect(readers).toEqual([
      ['PlainHandler.onPlain', false, 'JSON, plain only'],
      ['PlainHandler.onDeclared', false, 'JSON, plain only'],
      ['PlainHandler.onFramed', true, 'JSON'],
    ]);
    await moduleRef.close();
    await expect(moduleWith([AvroPlainHandler], registry).then((m) => m.init())).rejects.toThrow(/AvroPlainHandler\.on: .*"@IdempotentHandler registryFraming" is for format json/);
  });

  it('boots a JSON handler without any schema, and refuses an Avro handler without one or a JSON handler naming one', async () => {
    @Injectable()
    class JsonHandler {
      @IdempotentHandler({ topic: 'json.in', format: 'json' })
      async on(): Promise<void> {}
    }
    @Injectable()
    class NoSchemaHandler {
      @IdempotentHandler({ topic: 'avro.in' })
      async on(): Promise<void> {}
    }
    @Injectable()
    class JsonWithSchemaHandler {
      @IdempotentHandler({ topic: 'json.in', format: 'json', schema: 't.Ping' })
      async on(): Promise<void> {}
    }
    const json = await moduleWith([JsonHandler]);
    await json.init();
    expect(json.get(KafkaExactlyOnceExplorer).explore().map((h) => [h.reader.format, h.reader.describe])).toEqual([['json', 'JSON']]);
    await json.close();
    await expect(moduleWith([NoSchemaHandler]).then((m) => m.init())).rejects.toThrow(/no schema for topic "avro.in": its format is Avro \(the default\)/);
    await expect(moduleWith([JsonWithSchemaHandler]).then((m) => m.init())).rejects.toThrow(/"schema" names an Avro record, and the handler reads json/);
  });

  it("resolves messageIdFrom: the handler's own over its topic's, none without either", async () => {
    @Injectable()
    class KeyedHandlers {
      @IdempotentHandler({ topic: 'orders', format: 'json' })
      async onOrder(): Promise<void> {}

      @IdempotentHandler({ topic: 'refunds', format: 'json', messageIdFrom: (event: { refund: { id: string } }) => event.refund.id })
      async onRefund(): Promise<void> {}

      @IdempotentHandler({ topic: 'notes', format: 'json' })
      async onNote(): Promise<void> {}
    }
    const moduleRef = await moduleWith([KeyedHandlers], { topics: { orders: { format: 'json', messageIdFrom: 'order.id' }, refunds: { format: 'json', messageIdFrom: 'ignored' } } });
    const byTopic = Object.fromEntries(moduleRef.get(KafkaExactlyOnceExplorer).explore().map((h) => [h.topic, h.messageIdFrom]));
    const record = () => ({ topic: 't', partition: 0, offset: '0', key: null, keyBytes: null, headers: {}, timestamp: '0' });
    expect(byTopic['env.orders']!.describe).toBe('field order.id');
    expect(byTopic['env.orders']!.keyOf({ order: { id: 'o-1' } }, record)).toEqual({ key: Buffer.from('o-1') });
    expect(byTopic['env.refunds']!.keyOf({ refund: { id: 'r-1' }, ignored: 'x' }, record)).toEqual({ key: Buffer.from('r-1') });
    expect(byTopic['env.notes']).toBeUndefined();
  });
});
