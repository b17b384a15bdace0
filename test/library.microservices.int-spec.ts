import {
  ArgumentsHost,
  CallHandler,
  CanActivate,
  Catch,
  Controller,
  ExceptionFilter,
  ExecutionContext,
  ForbiddenException,
  Inject,
  Injectable,
  INestMicroservice,
  Module,
  NestInterceptor,
  PipeTransform,
  UseFilters,
  UseGuards,
  UseInterceptors,
} from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { AsyncMicroserviceOptions, ClientProxy, ClientsModule, Ctx, EventPattern, MessagePattern, Payload } from '@nestjs/microservices';
import { TypeOrmModule } from '@nestjs/typeorm';
import { mkdtempSync } from 'fs';
import { Kafka, Message } from 'kafkajs';
import { tmpdir } from 'os';
import { join } from 'path';
import { Pool } from 'pg';
import { catchError, lastValueFrom, Observable, of, tap, throwError, timeout } from 'rxjs';
import { DEAD_LETTER_HEADERS, EventContext, HandlerRegistrationError, IdempotentHandler, KafkaExactlyOnceLifecycle, KafkaExactlyOnceModule, NonRetriableHandlerError, OrderedEvent, OperatorStore, SchemaRegistry, pgPoolSql } from 'kafka-exactly-once';
import { clientKafkaExactlyOnce, KafkaExactlyOnceServer, RequestResponseNotSupportedError } from 'kafka-exactly-once/microservices';
import { encodeSingleObject } from 'kafka-exactly-once/testing';
import { kafkaControl } from './support/broker';
import { createSuiteDatabase } from './support/database';
import { kafkaBrokers, testDriver } from './support/environment';
import { createTopics, readTopic, testKafka, uniqueTopic } from './support/kafka';
import { CapturingLogger, schemasDirectory, sendRaw } from './support/library';
import { APPLIED, ENTRY, Entry, LIMIT } from './support/ledger';

const SIGNUP = { type: 'record', name: 'Signup', namespace: 'test.ledger', fields: [{ name: 'account', type: 'string' }] };

/** What the enhancers saw, per suite run. */
class PipelineProbe {
  readonly intercepted: string[] = [];
  readonly filtered: string[] = [];
}

/** A class-based interceptor with a dependency: Nest must find it in the controller's module. */
@Injectable()
class CountingInterceptor implements NestInterceptor {
  constructor(@Inject(PipelineProbe) private readonly probe: PipelineProbe) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const rpc = context.switchToRpc();
    const ctx = rpc.getContext<EventContext>();
    const label = `${context.getClass().name}.${context.getHandler().name}:${ctx.message.messageId}`;
    return next.handle().pipe(tap({ complete: () => this.probe.intercepted.push(label) }));
  }
}

/** Rejects entries and transfers of blocked accounts, with its reason. */
@Injectable()
class BlockedAccountGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const entry = context.switchToRpc().getData<Entry>();
    if (context.getType() === 'rpc' && entry.account.startsWith('blocked-')) throw new ForbiddenException(`account ${entry.account} is blocked by compliance`);
    return true;
  }
}

/** Normalizes the account (the handler sees what the pipe returns). */
@Injectable()
class AccountPipe implements PipeTransform<Entry, Entry> {
  transform(entry: Entry): Entry {
    return { ...entry, account: entry.account.trim().toLowerCase() };
  }
}

/** Sees every failure and lets it go on (rethrows): the record still fails. */
@Catch()
@Injectable()
class RecordingFilter implements ExceptionFilter {
  constructor(@Inject(PipelineProbe) private readonly probe: PipelineProbe) {}

  catch(exception: unknown, host: ArgumentsHost): never {
    this.probe.filtered.push(`${host.getType()}:${(exception as Error).message}`);
    throw exception;
  }
}

/** An exception filter in the RPC style: it answers with an Observable that errors, as Nest's own RPC filter does. */
@Catch()
class RpcStyleFilter implements ExceptionFilter {
  catch(exception: unknown): Observable<never> {
    return throwError(() => ({ status: 'error', message: (exception as Error).message }));
  }
}

/** A filter that only logs (and answers nothing but a Promise): the handler has failed all the same. */
@Catch()
@Injectable()
class AsyncLoggingFilter implements ExceptionFilter {
  constructor(@Inject(PipelineProbe) private readonly probe: PipelineProbe) {}

  async catch(exception: unknown): Promise<void> {
    await new Promise((r) => setTimeout(r, 1));
    this.probe.filtered.push(`async:${(exception as Error).message}`);
  }
}

/** An interceptor that swallows the handler's error: it must not pass for success. */
@Injectable()
class SwallowingInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(catchError(() => of(undefined)));
  }
}

/** Gives up on the handler after 50 ms, as a timeout interceptor does, while the handler goes on. */
@Injectable()
class ImpatientInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(timeout(50));
  }
}

/** What an HTTP application's global guard does to a Kafka event: refuse it. Global enhancers must not apply. */
@Injectable()
class HttpOnlyGlobalGuard implements CanActivate {
  canActivate(): boolean {
    return false;
  }
}

async function apply(entry: Entry, ctx: EventContext): Promise<void> {
  if (entry.amount > LIMIT) {
    const approved = await ctx.manager.query('SELECT 1 FROM approvals WHERE entry_id = $1', [entry.entryId]);
    if (approved.length === 0) throw new NonRetriableHandlerError(`entry ${entry.entryId} of ${entry.amount} is over ${LIMIT} and not approved`);
  }
  const [{ balance }] = await ctx.manager.query(
    'INSERT INTO balances (account, balance) VALUES ($1, $2) ON CONFLICT (account) DO UPDATE SET balance = balances.balance + EXCLUDED.balance RETURNING balance',
    [entry.account, entry.amount],
  );
  await ctx.manager.query('INSERT INTO applied (entry_id, account, attempt) VALUES ($1, $2, $3)', [entry.entryId, entry.account, ctx.attempt]);
  ctx.emit('ledger.applied', { entryId: entry.entryId, balance }, { key: entry.account });
}

@Controller()
@UseGuards(BlockedAccountGuard)
@UseInterceptors(CountingInterceptor)
@UseFilters(RecordingFilter)
class LedgerController {
  /** Ordered per account; its schema comes from the module's `topics` option. */
  @EventPattern('ledger.entries')
  @OrderedEvent({ key: (e: Entry) => e.account.trim().toLowerCase() })
  async onEntry(@Payload(AccountPipe) entry: Entry, @Ctx() ctx: EventContext): Promise<void> {
    await apply(entry, ctx);
  }

  /** Fails for `bad-` accounts; its filter answers with an Observable that errors, which must not pass for success. */
  @EventPattern('ledger.refunds', { schema: 'test.ledger.Entry', retry: { attempts: 2, initialDelayMs: 10 } })
  @UseFilters(RpcStyleFilter)
  async onRefund(@Payload() entry: Entry, @Ctx() ctx: EventContext): Promise<void> {
    if (entry.account.startsWith('bad-')) throw new Error(`refund ${entry.entryId} has no payment to refund`);
    await apply(entry, ctx);
  }

  @EventPattern('ledger.fees', { schema: 'test.ledger.Entry', retry: { attempts: 2, initialDelayMs: 10 } })
  @UseFilters(AsyncLoggingFilter)
  async onFee(@Payload() entry: Entry, @Ctx() ctx: EventContext): Promise<void> {
    await apply(entry, ctx);
    if (entry.account.startsWith('bad-')) throw new Error(`fee ${entry.entryId} failed after its writes`);
  }

  @EventPattern('ledger.rebates', { schema: 'test.ledger.Entry', retry: { attempts: 2, initialDelayMs: 10 } })
  @UseInterceptors(SwallowingInterceptor)
  async onRebate(@Payload() entry: Entry, @Ctx() ctx: EventContext): Promise<void> {
    await apply(entry, ctx);
    if (entry.account.startsWith('bad-')) throw new Error(`rebate ${entry.entryId} failed after its writes`);
  }

  // The wait before the second attempt outlasts the first one's handler: unless the pipeline waits for it, its
  // late writes land in the unit's transaction after the rollback of its attempt, and are committed.
  @EventPattern('ledger.slow', { schema: 'test.ledger.Entry', retry: { attempts: 2, initialDelayMs: 600 } })
  @UseInterceptors(ImpatientInterceptor)
  async onSlow(@Payload() entry: Entry, @Ctx() ctx: EventContext): Promise<void> {
    if (entry.account.startsWith('slow-')) await new Promise((r) => setTimeout(r, 300));
    await apply(entry, ctx);
  }

  /** Unordered (dead-letter and go on); its schema given with the pattern. */
  @EventPattern('ledger.transfers', { schema: 'test.ledger.Entry', retry: { attempts: 3, initialDelayMs: 10 } })
  async onTransfer(@Payload() entry: Entry, @Ctx() ctx: EventContext): Promise<void> {
    if (entry.account === 'flaky' && ctx.attempt < 2) throw new Error('flaky downstream');
    await apply(entry, ctx);
  }
}

/** An @IdempotentHandler beside them: the same pipeline runs around it. */
@Injectable()
@UseInterceptors(CountingInterceptor)
class SignupHandler {
  @IdempotentHandler({ topic: 'ledger.signups', schema: 'test.ledger.Signup' })
  async onSignup(event: { account: string }, ctx: EventContext): Promise<void> {
    if (event.account.startsWith('bad-')) throw new NonRetriableHandlerError(`signup ${event.account} is refused`);
    await ctx.manager.query('INSERT INTO signups (account) VALUES ($1)', [event.account]);
  }
}

@Controller()
class RequestResponseController {
  @MessagePattern('ledger.balance')
  balance(): number {
    return 0;
  }
}

/**
 * @EventPattern handlers under KafkaExactlyOnceServer (a Nest microservice made with createMicroservice), in
 * this process, on the real broker and PostgreSQL: the module's protocol (exactly once under duplicate
 * publishes, outputs, dead letters, @OrderedEvent parking), Nest's pipeline around them and around an
 * @IdempotentHandler, and ClientKafkaExactlyOnce publishing to them through ClientsModule.
 */
describe('library: @EventPattern handlers under KafkaExactlyOnceServer, ClientKafkaExactlyOnce', () => {
  let kafka: Kafka;
  let app: INestMicroservice;
  let databaseUrl: string;
  let pool: Pool;
  let store: OperatorStore;
  const probe = new PipelineProbe();
  const logger = new CapturingLogger({ logLevels: ['warn', 'error'] });
  const prefix = `${uniqueTopic('microservice')}.`;
  const group = `${prefix}group`;
  const dir = schemasDirectory('microservice', { 'entry.v1.avsc': ENTRY, 'applied.v1.avsc': APPLIED, 'signup.v1.avsc': SIGNUP });
  const entrySchema = SchemaRegistry.fromDirectory(dir).current('test.ledger.Entry');
  const spool = mkdtempSync(join(tmpdir(), 'keo-microservice-spool-'));

  const record = (entryId: string, account: string, amount: number, messageId = `msg-${entryId}`): Message => ({
    key: account,
    value: encodeSingleObject(entrySchema, { entryId, account, amount }),
    headers: { 'message-id': messageId },
  });
  const applied = async (account: string) => (await pool.query('SELECT entry_id, attempt FROM applied WHERE account = $1 ORDER BY seq', [account])).rows as Array<{ entry_id: string; attempt: number }>;
  const waitUntil = async (what: string, check: () => Promise<boolean>, timeoutMs = 60000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  const moduleOptions = (extra: { controllers?: unknown[] } = {}) => {
    @Module({
      imports: [
        TypeOrmModule.forRoot({ type: 'postgres', url: databaseUrl, extra: { max: 8 } }),
        KafkaExactlyOnceModule.forRoot({
          isGlobal: true,
          kafka: { clientId: 'microservice-test', brokers: kafkaBrokers() },
          driver: testDriver(),
          groupId: group,
          transactionalIdPrefix: 'microservice-test',
          schemas: { directory: dir },
          topicPrefix: prefix,
          topics: {
            'ledger.entries': { schema: 'test.ledger.Entry' },
            'ledger.applied': { schema: 'test.ledger.Applied' },
          },
          consumer: { sessionTimeout: 6000 },
          operations: { pollIntervalMs: 200 },
          publisher: { spool: { directory: spool }, sendTimeoutMs: 2000 },
        }),
        ClientsModule.registerAsync([clientKafkaExactlyOnce('LEDGER')]),
      ],
      controllers: (extra.controllers ?? [LedgerController]) as never[],
      providers: [
        { provide: PipelineProbe, useValue: probe },
        { provide: APP_GUARD, useClass: HttpOnlyGlobalGuard },
        CountingInterceptor,
        RecordingFilter,
        AsyncLoggingFilter,
        SignupHandler,
        KafkaExactlyOnceServer,
      ],
    })
    class LedgerMicroserviceModule {}
    return LedgerMicroserviceModule;
  };

  async function startMicroservice(module: unknown): Promise<INestMicroservice> {
    const microservice = await NestFactory.createMicroservice<AsyncMicroserviceOptions>(module as never, {
      inject: [KafkaExactlyOnceServer],
      useFactory: (server: KafkaExactlyOnceServer) => ({ strategy: server }),
      logger,
    });
    try {
      await microservice.listen();
      await microservice.get(KafkaExactlyOnceLifecycle).whenRunning();
    } catch (err) {
      await microservice.close(); // a boot that failed leaves nothing open
      throw err;
    }
    return microservice;
  }

  beforeAll(async () => {
    kafka = testKafka();
    databaseUrl = await createSuiteDatabase('microservice');
    pool = new Pool({ connectionString: databaseUrl, max: 4 });
    await pool.query('CREATE TABLE balances (account text PRIMARY KEY, balance int NOT NULL)');
    await pool.query('CREATE TABLE applied (seq bigserial PRIMARY KEY, entry_id text UNIQUE, account text, attempt int)');
    await pool.query('CREATE TABLE approvals (entry_id text PRIMARY KEY)');
    await pool.query('CREATE TABLE signups (account text PRIMARY KEY)');
    await createTopics(kafka, [`${prefix}ledger.entries`, `${prefix}ledger.transfers`, `${prefix}ledger.refunds`, `${prefix}ledger.fees`, `${prefix}ledger.rebates`, `${prefix}ledger.slow`, `${prefix}ledger.signups`, `${prefix}ledger.applied`], 3);
    app = await startMicroservice(moduleOptions());
    store = new OperatorStore(pgPoolSql(pool), group);
  });

  afterAll(async () => {
    kafkaControl('start');
    await app?.close();
    await pool?.end();
  });

  it('handles each message id once under duplicate publishes, through the pipe, with one output per entry', async () => {
    const records = Array.from({ length: 30 }, (_, i) => record(`e${i}`, ` ACCT-${i % 3} `, 1 + i));
    await sendRaw(kafka, `${prefix}ledger.entries`, records);
    await sendRaw(kafka, `${prefix}ledger.entries`, records); // every message id a second time
    await waitUntil('30 entries applied', async () => (await pool.query('SELECT count(*)::int AS n FROM applied WHERE entry_id LIKE $1', ['e%'])).rows[0].n === 30);
    // The pipe ran: the handler saw the account trimmed and in lower case.
    expect((await applied('acct-0')).map((r) => r.entry_id)).toEqual(Array.from({ length: 10 }, (_, i) => `e${i * 3}`));
    const outputs = await readTopic(kafka, `${prefix}ledger.applied`, { until: (rs) => rs.length >= 30, timeoutMs: 30000, pollIdleMs: 2000 });
    expect(outputs.map((r) => r.headers['causation-id']).sort()).toEqual(records.map((r) => String(r.headers!['message-id'])).sort());
    // The interceptor saw each handled entry once (duplicates are skipped before the handler).
    const seen = probe.intercepted.filter((l) => l.startsWith('LedgerController.onEntry:msg-e'));
    expect(seen).toHaveLength(30);
    expect(new Set(seen).size).toBe(30);
  });

  it('dead-letters at once what the guard rejects, with the guard\'s reason, and the exception filter sees it', async () => {
    await sendRaw(kafka, `${prefix}ledger.transfers`, [record('g1', 'blocked-7', 5), record('g2', 'open-7', 6)]);
    await waitUntil('g2 applied', async () => (await applied('open-7')).length === 1);
    const letters = await readTopic(kafka, `${prefix}ledger.transfers.dlq`, { until: (rs) => rs.length >= 1, timeoutMs: 30000 });
    expect(letters).toHaveLength(1);
    expect(letters[0].headers).toMatchObject({
      'message-id': 'msg-g1',
      [DEAD_LETTER_HEADERS.reason]: 'handler-failed',
      [DEAD_LETTER_HEADERS.errorClass]: 'ForbiddenException',
      [DEAD_LETTER_HEADERS.errorMessage]: 'account blocked-7 is blocked by compliance',
      [DEAD_LETTER_HEADERS.attempts]: '1', // a guard's refusal is not retried
    });
    expect(probe.filtered).toContain('rpc:account blocked-7 is blocked by compliance');
    expect(await applied('blocked-7')).toEqual([]);
  });

  it('counts an Observable that errors, as an RPC-style exception filter answers, as a failure: retried, then dead-lettered', async () => {
    await sendRaw(kafka, `${prefix}ledger.refunds`, [record('r1', 'bad-1', 3), record('r2', 'good-1', 4)]);
    await waitUntil('r2 applied', async () => (await applied('good-1')).length === 1);
    const letters = await readTopic(kafka, `${prefix}ledger.refunds.dlq`, { until: (rs) => rs.length >= 1, timeoutMs: 30000 });
    expect(letters.map((l) => l.headers['message-id'])).toEqual(['msg-r1']);
    expect(letters[0].headers[DEAD_LETTER_HEADERS.attempts]).toBe('2');
    expect(letters[0].headers[DEAD_LETTER_HEADERS.errorMessage]).toContain('refund r1 has no payment to refund');
    expect(await applied('bad-1')).toEqual([]);
  });

  it('a handler that throws has failed, whatever its filter answers or its interceptor catches: its writes are rolled back', async () => {
    await sendRaw(kafka, `${prefix}ledger.fees`, [record('x1', 'bad-fee', 3), record('x2', 'good-fee', 4)]);
    await sendRaw(kafka, `${prefix}ledger.rebates`, [record('y1', 'bad-rebate', 3), record('y2', 'good-rebate', 4)]);
    await waitUntil('x2 and y2 applied', async () => (await applied('good-fee')).length === 1 && (await applied('good-rebate')).length === 1);
    for (const topic of ['fees', 'rebates']) {
      const [letter, ...more] = await readTopic(kafka, `${prefix}ledger.${topic}.dlq`, { until: (rs) => rs.length >= 1, timeoutMs: 30000 });
      expect(more).toEqual([]);
      expect(letter.headers).toMatchObject({ [DEAD_LETTER_HEADERS.attempts]: '2', [DEAD_LETTER_HEADERS.errorClass]: 'Error' });
      expect(letter.headers[DEAD_LETTER_HEADERS.errorMessage]).toMatch(/failed after its writes/);
    }
    // The filter saw every failed attempt (the unit's first, optimistic pass included).
    expect(probe.filtered.filter((f) => f === 'async:fee x1 failed after its writes').length).toBeGreaterThanOrEqual(2);
    expect(await applied('bad-fee')).toEqual([]);
    expect(await applied('bad-rebate')).toEqual([]);
  });

  it('waits for a handler its interceptor gave up on (a timeout) before rolling back: none of its writes stay', async () => {
    await sendRaw(kafka, `${prefix}ledger.slow`, [record('z1', 'slow-1', 5), record('z2', 'quick-1', 6)]);
    const [letter] = await readTopic(kafka, `${prefix}ledger.slow.dlq`, { until: (rs) => rs.length >= 1, timeoutMs: 30000 });
    expect(letter.headers).toMatchObject({ 'message-id': 'msg-z1', [DEAD_LETTER_HEADERS.errorClass]: 'TimeoutError', [DEAD_LETTER_HEADERS.attempts]: '2' });
    await waitUntil('z2 applied', async () => (await applied('quick-1')).length === 1);
    await new Promise((r) => setTimeout(r, 500));
    expect(await applied('slow-1')).toEqual([]);
    expect((await pool.query(`SELECT balance FROM balances WHERE account = 'slow-1'`)).rows).toEqual([]);
  });

  it('retries a failing @EventPattern handler with the policy given with its pattern', async () => {
    await sendRaw(kafka, `${prefix}ledger.transfers`, [record('f1', 'flaky', 2)]);
    await waitUntil('f1 applied', async () => (await applied('flaky')).length === 1);
    expect(await applied('flaky')).toEqual([{ entry_id: 'f1', attempt: 2 }]);
    expect(probe.filtered).toContain('rpc:flaky downstream');
  });

  it('parks the key of an @OrderedEvent @EventPattern handler and releases it in order', async () => {
    await sendRaw(kafka, `${prefix}ledger.entries`, [record('p1', 'acct-p', 5000), record('p2', 'acct-p', 1), record('p3', 'acct-p', 2)]);
    await waitUntil('acct-p parked', async () => (await store.listParkedKeys({ key: 'acct-p' })).items[0]?.parkedRecords === 3);
    expect(await applied('acct-p')).toEqual([]);
    await pool.query(`INSERT INTO approvals VALUES ('p1')`);
    const release = await store.waitFor((await store.requestRelease(`${prefix}ledger.entries`, 'acct-p')).id, 60000);
    expect(release).toMatchObject({ state: 'done', result: { replayed: 3 } });
    expect((await applied('acct-p')).map((r) => r.entry_id)).toEqual(['p1', 'p2', 'p3']);
  });

  it('runs the pipeline around an @IdempotentHandler method too', async () => {
    const signups = SchemaRegistry.fromDirectory(dir).current('test.ledger.Signup');
    await sendRaw(kafka, `${prefix}ledger.signups`, [{ key: 's1', value: encodeSingleObject(signups, { account: 's1' }), headers: { 'message-id': 'msg-s1' } }]);
    await waitUntil('s1 signed up', async () => (await pool.query(`SELECT 1 FROM signups WHERE account = 's1'`)).rows.length === 1);
    expect(probe.intercepted).toContain('SignupHandler.onSignup:msg-s1');
  });

  it('logs handler failures once, through the library (Nest\'s default exception handler logs nothing)', async () => {
    // A handler without an exception filter of its own fails: Nest's default one would log it at error level.
    const signups = SchemaRegistry.fromDirectory(dir).current('test.ledger.Signup');
    await sendRaw(kafka, `${prefix}ledger.signups`, [{ key: 'bad-s', value: encodeSingleObject(signups, { account: 'bad-s' }), headers: { 'message-id': 'msg-bad-s' } }]);
    await readTopic(kafka, `${prefix}ledger.signups.dlq`, { until: (rs) => rs.length >= 1, timeoutMs: 30000 });
    expect(logger.lines.filter((l) => l.context === 'ExceptionsHandler')).toEqual([]);
    expect(logger.lines.some((l) => l.level === 'warn' && l.message.includes('"messageId":"msg-bad-s"') && l.message.includes('signup bad-s is refused'))).toBe(true);
    // The flaky transfer's first attempt (an earlier test): one warning of the library's.
    expect(logger.lines.some((l) => l.level === 'warn' && l.message.startsWith('LedgerController.onTransfer failed on') && l.message.includes('(attempt 1/3): flaky downstream'))).toBe(true);
  });

  it('ClientKafkaExactlyOnce: emit publishes through the EventPublisher (sent) to the @EventPattern handler; send is refused', async () => {
    const client = app.get<ClientProxy>('LEDGER');
    const result = await lastValueFrom(client.emit('ledger.entries', { value: { entryId: 'c1', account: 'acct-c', amount: 7 }, key: 'acct-c', messageId: 'msg-c1' }));
    expect(result).toMatchObject({ status: 'sent', messageId: 'msg-c1' });
    await waitUntil('c1 applied', async () => (await applied('acct-c')).length === 1);
    await expect(lastValueFrom(client.emit('ledger.entries', { value: { entryId: 'c2', account: 'acct-c' }, key: 'acct-c' }))).rejects.toThrow(/amount/);
    await expect(lastValueFrom(client.send('ledger.balance', {}))).rejects.toThrow(RequestResponseNotSupportedError);
  });

  it('ClientKafkaExactlyOnce: emit during a broker outage reports spooled, and the event arrives once when Kafka is back', async () => {
    const client = app.get<ClientProxy>('LEDGER');
    kafkaControl('stop');
    let results: Array<{ status: string }>;
    try {
      results = [];
      for (let i = 0; i < 5; i++) {
        results.push(await lastValueFrom(client.emit('ledger.entries', { value: { entryId: `o${i}`, account: 'acct-o', amount: 1 + i }, key: 'acct-o', messageId: `msg-o${i}` })));
      }
    } finally {
      kafkaControl('start');
    }
    expect(results.map((r) => r.status)).toEqual(Array(5).fill('spooled'));
    await waitUntil('o0..o4 applied', async () => (await applied('acct-o')).length === 5, 120000);
    expect((await applied('acct-o')).map((r) => r.entry_id)).toEqual(['o0', 'o1', 'o2', 'o3', 'o4']);
    const outputs = await readTopic(kafka, `${prefix}ledger.applied`, { until: (rs) => rs.filter((r) => r.key === 'acct-o').length >= 5, timeoutMs: 30000, pollIdleMs: 2000 });
    expect(outputs.filter((r) => r.key === 'acct-o').map((r) => r.headers['causation-id'])).toEqual(['msg-o0', 'msg-o1', 'msg-o2', 'msg-o3', 'msg-o4']);
  });

  it('refuses at boot a @MessagePattern handler bound to it (request-response), saying what to use', async () => {
    await expect(startMicroservice(moduleOptions({ controllers: [LedgerController, RequestResponseController] }))).rejects.toThrow(HandlerRegistrationError);
    await expect(startMicroservice(moduleOptions({ controllers: [RequestResponseController] }))).rejects.toThrow(/carries events, not requests.*@EventPattern/);
  });
});
