import * as api from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import { AlwaysOffSampler, BasicTracerProvider, InMemorySpanExporter, ParentBasedSampler, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { RecordInfo } from '../interfaces/record-info.interface';
import { HeaderReader, KafkaExactlyOnceTracing } from './kafka-exactly-once.tracing';

const PARENT_TRACE = '0af7651916cd43dd8448eb211c80319c';
const TRACEPARENT = `00-${PARENT_TRACE}-b7ad6b7169203331-01`;

/** A record whose `headers` (all of them as text) must not be read, and a reader counting the names asked for. */
function record(headers: Record<string, string>): { info: RecordInfo; reader: HeaderReader; asked: string[]; decodedAll: () => boolean } {
  const asked: string[] = [];
  let decoded = false;
  const info = { topic: 't', partition: 0, offset: '1', key: null, messageId: 'm', timestamp: '0' } as RecordInfo;
  Object.defineProperty(info, 'headers', { get: () => ((decoded = true), headers) });
  return { info, asked, decodedAll: () => decoded, reader: { get: (name) => (asked.push(name), headers[name]), names: () => Object.keys(headers) } };
}

describe('tracing: what a record pays for it', () => {
  afterEach(() => {
    api.trace.disable();
    api.propagation.disable();
    api.context.disable();
  });

  it('with no SDK but a baggage propagator: the record baggage reaches the handler and its outputs', () => {
    api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    api.propagation.setGlobalPropagator(new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }));
    const { info, reader } = record({ baggage: 'tenant=a' });
    const span = new KafkaExactlyOnceTracing(api as never).process(info, 'h', reader);
    expect(span.headers).toEqual({ baggage: 'tenant=a' });
    expect(span.run(() => api.propagation.getActiveBaggage()?.getEntry('tenant')?.value)).toBe('a');
  });

  it('with @opentelemetry/api but no SDK: no span, no headers to carry, the record headers untouched', () => {
    const { info, reader, asked, decodedAll } = record({ traceparent: TRACEPARENT, big: 'x'.repeat(1000) });
    const span = new KafkaExactlyOnceTracing(api as never).process(info, 'h', reader);
    expect(span.headers).toEqual({});
    expect(decodedAll()).toBe(false);
    expect(asked).toEqual([]);
    expect(span.run(() => 42)).toBe(42);
    expect(() => span.end(new Error('boom'))).not.toThrow();
  });

  it('with an SDK and the W3C propagator: a child of the record trace, reading only the names the propagator asks for', () => {
    const exporter = new InMemorySpanExporter();
    api.trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
    api.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const { info, reader, asked, decodedAll } = record({ traceparent: TRACEPARENT, 'message-id': 'm', other: 'o' });
    const span = new KafkaExactlyOnceTracing(api as never).process(info, 'onOrder', reader);
    expect(span.headers.traceparent).toMatch(new RegExp(`^00-${PARENT_TRACE}-[0-9a-f]{16}-01$`));
    span.end();
    const [done] = exporter.getFinishedSpans();
    expect(done.spanContext().traceId).toBe(PARENT_TRACE);
    expect([...new Set(asked)].sort()).toEqual(['traceparent', 'tracestate']);
    expect(decodedAll()).toBe(false);
  });

  it('a span sampled out still carries its trace on (the outputs keep the traceparent)', () => {
    api.trace.setGlobalTracerProvider(new BasicTracerProvider({ sampler: new ParentBasedSampler({ root: new AlwaysOffSampler(), remoteParentSampled: new AlwaysOffSampler() }) }));
    api.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const { info, reader } = record({ traceparent: TRACEPARENT });
    const span = new KafkaExactlyOnceTracing(api as never).process(info, 'h', reader);
    expect(span.headers.traceparent).toContain(PARENT_TRACE);
  });
});
