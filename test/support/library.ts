import { ConsoleLogger, LogLevel, Type } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { mkdtempSync, writeFileSync } from 'fs';
import { Kafka, Message, Partitioners } from 'kafkajs';
import { tmpdir } from 'os';
import { join } from 'path';
import { Client } from 'pg';
import { KafkaExactlyOnceLifecycle } from 'kafka-exactly-once';

/**
 * Starts an application module that imports KafkaExactlyOnceModule, in this process (the library's own
 * suites): compiled, with shutdown hooks, initialised, and with its consumer running (it joins its group in the
 * background after the boot).
 */
export async function startLibraryModule(module: Type<unknown>, logger: LogLevel[] | ConsoleLogger = ['warn', 'error']): Promise<TestingModule> {
  const moduleRef = await Test.createTestingModule({ imports: [module] })
    .setLogger(Array.isArray(logger) ? new ConsoleLogger({ logLevels: logger }) : logger)
    .compile();
  moduleRef.enableShutdownHooks();
  await moduleRef.init();
  await moduleRef.get(KafkaExactlyOnceLifecycle).whenRunning();
  return moduleRef;
}

/** A schemas directory of its own with these .avsc files (name -> schema). */
export function schemasDirectory(label: string, files: Record<string, object>): string {
  const dir = mkdtempSync(join(tmpdir(), `keo-${label}-schemas-`));
  for (const [name, schema] of Object.entries(files)) writeFileSync(join(dir, name), JSON.stringify(schema));
  return dir;
}

/** Sends records as they are (any key, value and header bytes) with an idempotent producer, acks all. */
export async function sendRaw(kafka: Kafka, topic: string, messages: Message[]): Promise<void> {
  const producer = kafka.producer({ idempotent: true, createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  try {
    await producer.send({ topic, acks: -1, messages });
  } finally {
    await producer.disconnect();
  }
}

/** Runs one query on a database of the test run, on a connection of its own. */
export async function queryDatabase<T = Record<string, any>>(databaseUrl: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    return (await db.query(sql, params)).rows as T[];
  } finally {
    await db.end();
  }
}

/** Keeps what was logged at warn and error level, with its context. */
export class CapturingLogger extends ConsoleLogger {
  readonly lines: Array<{ level: 'log' | 'warn' | 'error'; context: string; message: string }> = [];
  /** Kept only when the logger was made with 'log' among its levels. */
  override log(message: unknown, ...rest: unknown[]): void {
    if (this.isLevelEnabled('log')) this.lines.push({ level: 'log', context: String(rest.at(-1)), message: String(message) });
    super.log(message, ...(rest as []));
  }
  override warn(message: unknown, ...rest: unknown[]): void {
    this.lines.push({ level: 'warn', context: String(rest.at(-1)), message: String(message) });
    super.warn(message, ...(rest as []));
  }
  override error(message: unknown, ...rest: unknown[]): void {
    this.lines.push({ level: 'error', context: String(rest.at(-1)), message: message instanceof Error ? message.message : String(message) });
    super.error(message, ...(rest as []));
  }
}
