import { Controller, Injectable, Logger } from '@nestjs/common';
import { Ctx, EventPattern, MessagePattern, Payload, Transport } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { mkdtempSync, writeFileSync } from 'fs';
import { tmpdir } from 'os';
import { join } from 'path';
import { OrderedEvent } from '../decorators/ordered-event.decorator';
import { IdempotentHandler } from '../decorators/idempotent-handler.decorator';
import { HandlerRegistrationError } from '../errors/handler-registration.error';
import { KafkaExactlyOnceLifecycle } from '../kafka-exactly-once.lifecycle';
import { KafkaExactlyOnceModule } from '../kafka-exactly-once.module';
import type { HandlerDefinition } from '../engine/handler-definition';
import { KAFKA_EXACTLY_ONCE_TRANSPORT, KafkaExactlyOnceServer } from './kafka-exactly-once.server';

const schemas = mkdtempSync(join(tmpdir(), 'keo-server-'));
writeFileSync(join(schemas, 'ping.avsc'), JSON.stringify({ type: 'record', name: 'Ping', namespace: 't', fields: [{ name: 'n', type: 'int' }] }));

@Controller()
class PingController {
  @EventPattern('pings', { schema: 't.Ping', retry: { attempts: 5 } })
  @OrderedEvent({ key: (e: { n: number }) => e.n })
  onPing(@Payload() _event: unknown, @Ctx() _ctx: unknown) {}

  @EventPattern('declared') // schema from the module's topics option
  onDeclared() {}

  @EventPattern('elsewhere', Transport.KAFKA) // bound to Nest's Kafka transport, not to this one
  onElsewhere() {}

  @EventPattern('mine', KAFKA_EXACTLY_ONCE_TRANSPORT, { schema: 't.Ping', retryTopics: { delays: ['30s', '5m'] } })
  onMine() {}
}

@Controller()
class RequestController {
  @MessagePattern('questions')
  answer() {
    return 42;
  }
}

@Controller()
class NoSchemaController {
  @EventPattern('unknown.topic')
  onUnknown() {}
}

@Controller()
class ObjectPatternController {
  @EventPattern({ cmd: 'ping' }, { schema: 't.Ping' })
  onObject() {}
}

@Controller()
class ElsewhereOrderedController {
  @EventPattern('elsewhere', Transport.KAFKA)
  @OrderedEvent()
  onElsewhere() {}
}

@Controller()
class BadRetryController {
  @EventPattern('pings', { schema: 't.Ping', retry: { attempts: 0 } })
  onPing() {}
}

@Injectable()
class PingHandler {
  @IdempotentHandler({ topic: 'pings', schema: 't.Ping' })
  onPing() {}
}

/** The module of these specs: discovery and checks, no consumer started (nothing listens at its broker). */
const testModule = () =>
  KafkaExactlyOnceModule.forRoot({
    kafka: { clientId: 't', brokers: ['127.0.0.1:1'] },
    groupId: 'g',
    transactionalIdPrefix: 't',
    schemas: { directory: schemas },
    topicPrefix: 'env.',
    topics: { declared: { schema: 't.Ping' } },
    autoStart: false,
  });

/** A microservice on KafkaExactlyOnceServer, initialised (discovery and checks) without starting a consumer. */
async function microservice(controllers: unknown[], providers: unknown[] = []) {
  const moduleRef = await Test.createTestingModule({
    imports: [testModule()],
    controllers: controllers as never[],
    providers: [KafkaExactlyOnceServer, ...(providers as never[])],
  }).compile();
  const app = moduleRef.createNestMicroservice({ strategy: moduleRef.get(KafkaExactlyOnceServer) });
  await app.init();
  const handlers = (moduleRef.get(KafkaExactlyOnceLifecycle) as unknown as { handlers: HandlerDefinition[] }).handlers;
  return { app, handlers };
}

describe('KafkaExactlyOnceServer', () => {
  it('says at start how many @EventPattern handlers it hands to the module, in a hybrid application started as the docs show', async () => {
    const log = jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
    try {
      const moduleRef = await Test.createTestingModule({
        imports: [testModule()],
        controllers: [PingController],
        providers: [KafkaExactlyOnceServer],
      }).compile();
      const app = moduleRef.createNestApplication();
      // connectMicroservice + startAllMicroservices before the application initialises (app.listen, app.init).
      app.connectMicroservice({ strategy: app.get(KafkaExactlyOnceServer) });
      await app.startAllMicroservices();
      await app.init();
      const lines = log.mock.calls.map(([message]) => String(message)).filter((m) => m.includes('@EventPattern handler'));
      expect(lines).toEqual(['3 @EventPattern handler(s) bound to KafkaExactlyOnceServer, consumed by KafkaExactlyOnceModule in group g']);
      await app.close();
    } finally {
      log.mockRestore();
    }
  });

  it('hands the @EventPattern handlers bound to it to the module: topic with its prefix, schema from the pattern or the module, retry, retry topics, @OrderedEvent', async () => {
    const { app, handlers } = await microservice([PingController]);
    expect(handlers.map((h) => [h.name, h.topic, h.reader.schema!.name])).toEqual([
      ['PingController.onPing', 'env.pings', 't.Ping'],
      ['PingController.onDeclared', 'env.declared', 't.Ping'],
      ['PingController.onMine', 'env.mine', 't.Ping'],
    ]);
    const [ping] = handlers;
    expect(ping.retry.attempts).toBe(5);
    expect(ping.ordering?.key?.({ n: 3 })).toBe(3);
    expect(handlers[2].retryTopics).toMatchObject({ topics: ['env.mine.retry.1', 'env.mine.retry.2'], delaysMs: [30000, 300000] });
    await app.close();
  });

  it('refuses @MessagePattern (request-response), saying what to use instead', async () => {
    await expect(microservice([RequestController])).rejects.toThrow(HandlerRegistrationError);
    await expect(microservice([RequestController])).rejects.toThrow(/carries events, not requests\. Publish with client\.emit.*@EventPattern.*ctx\.emit/);
  });

  it('refuses a pattern without a schema, naming both ways to give one', async () => {
    await expect(microservice([NoSchemaController])).rejects.toThrow(
      /NoSchemaController\.onUnknown: no schema for topic "unknown.topic": its format is Avro \(the default\); give it with @EventPattern\('unknown.topic', \{ schema: '<full name>' \}\) or declare topics\["unknown.topic"\]\.schema/,
    );
  });

  it('refuses a pattern that is not a topic name', async () => {
    await expect(microservice([ObjectPatternController])).rejects.toThrow(/the pattern of an @EventPattern handler is the topic it consumes/);
  });

  it('holds the retry policy of the pattern to the module\'s rules, naming where it came from', async () => {
    await expect(microservice([BadRetryController])).rejects.toThrow(/BadRetryController\.onPing: @EventPattern extras option "retry\.attempts" must be an integer >= 1, got 0/);
  });

  it('warns at boot about @OrderedEvent on a handler it does not consume (bound to another transport)', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const { app } = await microservice([PingController, ElsewhereOrderedController]);
      const warnings = warn.mock.calls.map(([message]) => String(message));
      expect(warnings).toContainEqual(expect.stringMatching(/^ElsewhereOrderedController\.onElsewhere has @OrderedEvent but this module does not consume it/));
      expect(warnings.some((w) => w.startsWith('PingController.onPing has @OrderedEvent'))).toBe(false);
      await app.close();
    } finally {
      warn.mockRestore();
    }
  });

  it('refuses an @EventPattern and an @IdempotentHandler on the same topic', async () => {
    await expect(microservice([PingController], [PingHandler])).rejects.toThrow(/topic "env.pings" already has a handler in group "g"/);
  });
});
