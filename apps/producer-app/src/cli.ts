import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventPublisher } from 'kafka-exactly-once';
import { parseLoadOptions } from './load/load-options';
import { runLoad } from './load/load-runner';
import { producerAppConfig } from './producer-app.config';
import { ProducerCliModule } from './producer-app.module';

/**
 * The load command: `npm run produce -- payments --count N --accounts K [--duplicates 0.05] [--rate R]`.
 * Publishes through the library's EventPublisher (so an outage spools, and the command waits for its spool to
 * drain before it exits), draws a progress bar on stderr and prints a summary line, then a JSON one.
 */
async function main(): Promise<void> {
  let options;
  try {
    options = parseLoadOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(2);
  }
  const app = await NestFactory.createApplicationContext(ProducerCliModule, { logger: ['warn', 'error'] });
  app.enableShutdownHooks();
  const publisher = app.get(EventPublisher);
  let lastDraw = 0;
  const draw = (done: number, total: number) => {
    const now = Date.now();
    if (now - lastDraw < 200 && done < total) return;
    lastDraw = now;
    const width = 30;
    const filled = Math.round((done / total) * width);
    const status = publisher.status();
    const line = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} published, ${status.spooled} spooled, breaker ${status.breaker}`;
    process.stderr.write(process.stderr.isTTY ? `\r${line}` : `${line}\n`);
  };
  const summary = await runLoad(publisher, options, draw, producerAppConfig().eventFormat);
  if (process.stderr.isTTY) process.stderr.write('\n');
  const backlog = publisher.status().spool.records;
  if (backlog > 0) process.stderr.write(`waiting for ${backlog} spooled events to reach Kafka...\n`);
  await publisher.flush(10 * 60 * 1000);
  if (summary.spoolPeak > 0 && summary.spoolEmptyAt === undefined) summary.spoolEmptyAt = Date.now();
  const rate = Math.round((summary.events + summary.duplicatePublishes) / Math.max(0.001, summary.elapsedMs / 1000));
  process.stdout.write(
    `published ${summary.events} ${summary.kind} (+${summary.duplicatePublishes} duplicate publishes) to ${summary.topic}: ` +
      `${summary.sent} sent, ${summary.spooled} spooled and delivered later, in ${(summary.elapsedMs / 1000).toFixed(1)} s (${rate}/s)\n`,
  );
  process.stdout.write(`SUMMARY ${JSON.stringify({ ...summary, drained: publisher.status().drained })}\n`);
  await app.close();
  // Everything is in Kafka and the publisher is closed. A send that KafkaJS still retries inside a producer
  // given up after an outage may hold a socket open; it has nothing left to deliver, so do not wait for it.
  process.exit(0);
}

main().catch((err) => {
  new Logger('produce').error(err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exit(1);
});
