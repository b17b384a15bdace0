import type { RecordInfo } from '../interfaces/record-info.interface';

// @opentelemetry/api is an optional peer: its types are not imported, so that applications without it compile.
type Context = object;
interface Span {
  isRecording?(): boolean;
  spanContext?(): object;
  setAttribute(key: string, value: string | number): void;
  setStatus(status: { code: number; message?: string }): void;
  recordException(exception: Error | string): void;
  end(): void;
}
interface OpenTelemetryApi {
  ROOT_CONTEXT: Context;
  SpanKind: { PRODUCER: number; CONSUMER: number };
  SpanStatusCode: { ERROR: number };
  trace: {
    getTracer(name: string, version?: string): { startSpan(name: string, options: { kind: number; attributes?: Record<string, string | number> }, context?: Context): Span };
    setSpan(context: Context, span: Span): Context;
    isSpanContextValid?(spanContext: object): boolean;
  };
  context: { active(): Context; with<T>(context: Context, fn: () => T): T };
  propagation: {
    inject(context: Context, carrier: Record<string, string>): void;
    extract<C>(context: Context, carrier: C, getter?: { get(carrier: C, key: string): string | undefined; keys(carrier: C): string[] }): Context;
  };
}

/** A record's headers as a propagator reads them: one name at a time, as text (the first of a repeated name). */
export interface HeaderReader {
  get(name: string): string | undefined;
  names(): string[];
}

const READER_GETTER = { get: (carrier: HeaderReader, key: string) => carrier.get(key), keys: (carrier: HeaderReader) => carrier.names() };

/** A span of the library's: the headers that carry it to records, and how it ends. */
export interface TracedSpan {
  /** `traceparent` (and `tracestate`) of this span, for the records it writes; empty when tracing is off. */
  readonly headers: Record<string, string>;
  /** Runs `fn` with this span as the active one, so that the handler's own spans become its children. */
  run<T>(fn: () => T): T;
  end(error?: unknown, attributes?: Record<string, string | number>): void;
}

const OFF: TracedSpan = { headers: {}, run: (fn) => fn(), end: () => undefined };
/** Message ids may be long: attributes keep the first 256 characters. */
const MAX_ID = 256;

/**
 * Tracing with OpenTelemetry when the application has `@opentelemetry/api` (an optional peer) and registers an
 * SDK; no-ops otherwise. The W3C `traceparent` goes from `EventPublisher.publish` (a `send` span) in the
 * record's headers, through the consumer's `process` span around the handler (a child of the publisher's), to
 * every event the handler emits, whose records carry the `process` span's context: one trace from the first
 * publish to the last output, across services. Spooled and replayed records keep the headers they had.
 */
export class KafkaExactlyOnceTracing {
  private readonly api?: OpenTelemetryApi;

  /** `api`: @opentelemetry/api when installed; null turns tracing off. */
  constructor(api: OpenTelemetryApi | null = loadOpenTelemetry() ?? null) {
    this.api = api ?? undefined;
  }

  /** A PRODUCER span for a publish of `count` events to `topic`. */
  send(topic: string, count = 1): TracedSpan {
    if (!this.api) return OFF;
    const attributes: Record<string, string | number> = { 'messaging.system': 'kafka', 'messaging.operation.type': 'send', 'messaging.destination.name': topic };
    if (count > 1) attributes['messaging.batch.message_count'] = count;
    return this.start(`send ${topic}`, this.api.SpanKind.PRODUCER, attributes, this.api.context.active());
  }

  /**
   * A CONSUMER span for one record's handling, the child of the context its headers carry. `headers`: a reader of
   * the record's headers, so that the propagator decodes only the names it asks for (`traceparent`, `tracestate`)
   * rather than every header of every record (`record.headers`, the default).
   */
  process(record: RecordInfo, handlerName: string, headers?: HeaderReader): TracedSpan {
    if (!this.api) return OFF;
    let parent: Context;
    try {
      parent = headers ? this.api.propagation.extract(this.api.ROOT_CONTEXT, headers, READER_GETTER) : this.api.propagation.extract(this.api.ROOT_CONTEXT, record.headers);
    } catch {
      parent = this.api.ROOT_CONTEXT; // a propagator that cannot read this record's headers: a trace of its own
    }
    return this.start(`process ${record.topic}`, this.api.SpanKind.CONSUMER, {
      'messaging.system': 'kafka',
      'messaging.operation.type': 'process',
      'messaging.destination.name': record.topic,
      'messaging.destination.partition.id': String(record.partition),
      'messaging.kafka.offset': Number(record.offset),
      'messaging.message.id': record.messageId.slice(0, MAX_ID),
      'kafka_eo.handler': handlerName,
    }, parent);
  }

  /** A span, or no span when the SDK or a propagator throws: tracing never fails the work it traces. */
  private start(name: string, kind: number, attributes: Record<string, string | number>, parent: Context): TracedSpan {
    const api = this.api as OpenTelemetryApi;
    let span: Span;
    let context: Context;
    const headers: Record<string, string> = {};
    try {
      span = api.trace.getTracer('kafka-exactly-once').startSpan(name, { kind, attributes }, parent);
      // Nothing came in (no trace, no baggage: the propagator gave the root context back), no SDK records the span
      // and it has no trace to carry on: nothing to record, nothing to inject, no context to run the handler in.
      if (parent === api.ROOT_CONTEXT && span.isRecording?.() === false && span.spanContext && api.trace.isSpanContextValid?.(span.spanContext()) === false) return OFF;
      context = api.trace.setSpan(parent, span);
      api.propagation.inject(context, headers);
    } catch {
      return OFF;
    }
    return {
      headers,
      run: (fn) => api.context.with(context, fn),
      end: (error, more) => {
        try {
          for (const [key, value] of Object.entries(more ?? {})) span.setAttribute(key, value);
          if (error !== undefined) {
            span.recordException(error instanceof Error ? error : String(error));
            span.setStatus({ code: api.SpanStatusCode.ERROR, message: (error as Error)?.message ?? String(error) });
          }
          span.end();
        } catch {
          // an SDK that fails to record must not fail the handler or the publish
        }
      },
    };
  }
}

function loadOpenTelemetry(): OpenTelemetryApi | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require('@opentelemetry/api') as OpenTelemetryApi;
  } catch (err) {
    if ((err as { code?: string }).code === 'MODULE_NOT_FOUND') return undefined;
    throw err;
  }
}

/** Tracing off, for callers without the module's instance. */
export const TRACING_OFF = new KafkaExactlyOnceTracing(null);
