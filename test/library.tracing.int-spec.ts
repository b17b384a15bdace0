import { Injectable, Module } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import { TypeOrmModule } from '@nestjs/typeorm';
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { EventContext, EventPublisher, IdempotentHandler, KafkaExactlyOnceModule } from 'kafka-exactly-once';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { schemasDirectory, startLibraryModule } from './support/library';
import { waitUntil } from './support/payments';

const ORDER = { type: 'record', name: 'Order', namespace: 'test.tracing', fields: [{ name: 'id', type: 'string' }, { name: 'fail', type: 'boolean', default: false }] };
const SHIPMENT = { type: 'record', name: 'Shipment', namespace: 'test.tracing', fields: [{ name: 'orderId', type: 'string' }] };

const shipped: string[] = [];

@Injectable()
class TracedHandlers {
  @IdempotentHandler({ topic: 'orders', schema: 'test.tracing.Order', retry: { attempts: 1 } })
  async onOrder(order: { id: string; fail: boolean }, ctx: EventContext): Promise<void> {
    // A span of the handler's own: a child of the library's process span.
    trace.getTracer('test').startActiveSpan('reserve stock', (span) => span.end());
    if (order.fail) throw new Error(`order ${order.id} cannot be shipped`);
    ctx.emit('shipments', { orderId: order.id }, { key: order.id });
  }

  @IdempotentHandler({ topic: 'shipments', schema: 'test.tracing.Shipment' })
  async onShipment(shipment: { orderId: string }): Promise<void> {
    shipped.push(shipment.orderId);
  }
}

/**
 * OpenTelemetry (an optional peer) with the SDK's in-memory exporter: one trace from the publish through the
 * handler's span to the emitted event and the handler of that event, carried by the W3C `traceparent` header.
 */
describe('library: tracing with OpenTelemetry', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const prefix = `${uniqueTopic('tracing')}.`;
  let moduleRef: TestingModule;

  beforeAll(async () => {
    trace.setGlobalTracerProvider(provider);
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    const databaseUrl = await createSuiteDatabase('tracing');
    await createTopics(testKafka(), [`${prefix}orders`, `${prefix}shipments`], 2);
    const dir = schemasDirectory('tracing', { 'order.avsc': ORDER, 'shipment.avsc': SHIPMENT });

    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl }),
        KafkaExactlyOnceModule.forRoot({
          kafka: { clientId: 'tracing-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: `${prefix}group`,
          transactionalIdPrefix: 'tracing-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
          topics: { orders: { schema: 'test.tracing.Order', key: (o: { id: string }) => o.id }, shipments: { schema: 'test.tracing.Shipment' } },
          publisher: { spool: { directory: schemasDirectory('tracing-spool', {}) } },
        }),
      ],
      providers: [TracedHandlers],
    })
    class TracingModule {}
    moduleRef = await startLibraryModule(TracingModule);
  });

  afterAll(async () => {
    await moduleRef?.close();
    trace.disable();
    propagation.disable();
    context.disable();
  });

  const spansOf = (traceId: string) => exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
  const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

  it('publish, handler, emitted event and its handler are one trace, each span the child of the one before', async () => {
    const publisher = moduleRef.get(EventPublisher);
    const root = trace.getTracer('test').startSpan('checkout');
    const result = await context.with(trace.setSpan(context.active(), root), () => publisher.publish('orders', { id: 'o-1', fail: false }));
    root.end();
    expect(result.status).toBe('sent');
    const traceId = root.spanContext().traceId;
    await waitUntil(async () => shipped.includes('o-1') && spansOf(traceId).some((s) => s.name === `process ${prefix}shipments`), 60000, 'the shipment handled');

    const spans = spansOf(traceId);
    const byName = (name: string) => {
      const found = spans.filter((s) => s.name === name);
      expect(found).toHaveLength(1);
      return found[0];
    };
    const send = byName(`send ${prefix}orders`);
    const processOrder = byName(`process ${prefix}orders`);
    const reserve = byName('reserve stock');
    const processShipment = byName(`process ${prefix}shipments`);
    expect(send.kind).toBe(SpanKind.PRODUCER);
    expect(parentOf(send)).toBe(root.spanContext().spanId);
    expect(processOrder.kind).toBe(SpanKind.CONSUMER);
    expect(parentOf(processOrder)).toBe(send.spanContext().spanId);
    expect(parentOf(reserve)).toBe(processOrder.spanContext().spanId);
    expect(parentOf(processShipment)).toBe(processOrder.spanContext().spanId);
    expect(processOrder.attributes).toMatchObject({
      'messaging.system': 'kafka',
      'messaging.destination.name': `${prefix}orders`,
      'messaging.message.id': result.messageId,
      'kafka_eo.handler': 'TracedHandlers.onOrder',
      'kafka_eo.attempts': 1,
    });
    expect(send.attributes).toMatchObject({ 'messaging.message.id': result.messageId, 'kafka_eo.status': 'sent' });

    // The records themselves carry it: the emitted shipment's traceparent names the order's process span.
    const [record] = await readTopic(testKafka(), `${prefix}shipments`, { until: (rs) => rs.length >= 1, timeoutMs: 30000 });
    expect(record.headers.traceparent).toBe(`00-${traceId}-${processOrder.spanContext().spanId}-01`);
  });

  it('a handler that fails for good ends its span with an error, in the publisher trace', async () => {
    const publisher = moduleRef.get(EventPublisher);
    const result = await publisher.publish('orders', { id: 'o-2', fail: true });
    const send = exporter.getFinishedSpans().find((s) => s.name === `send ${prefix}orders` && s.attributes['messaging.message.id'] === result.messageId) as ReadableSpan;
    expect(send).toBeDefined();
    const traceId = send.spanContext().traceId;
    const failed = () => spansOf(traceId).filter((s) => s.name === `process ${prefix}orders` && s.status.code === SpanStatusCode.ERROR);
    await waitUntil(async () => failed().length > 0, 60000, 'the failing handler span');
    // The run with savepoints, which dead-letters the record, ends its span with the handler's own error (an
    // earlier run without savepoints, rolled back, says so in its message).
    await waitUntil(async () => failed().some((s) => s.status.message === 'order o-2 cannot be shipped'), 30000, 'the dead-lettering run\'s span');
    expect(failed().find((s) => s.status.message === 'order o-2 cannot be shipped')?.attributes['kafka_eo.attempts']).toBe(1);
    expect(spansOf(traceId).some((s) => s.name === `process ${prefix}shipments`)).toBe(false);
  });
});
