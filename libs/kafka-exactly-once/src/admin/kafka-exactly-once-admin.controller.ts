import { Body, Controller, Get, HttpCode, Param, Post, Query, Req, Res, UseFilters, UseGuards } from '@nestjs/common';
import { Inject } from '@nestjs/common';
import { OperatorRequestError } from '../errors/operator-request.error';
import { ADMIN_API_PATH, ADMIN_OPTIONS, type ResolvedAdminOptions } from './admin.options';
import { auditQuery, bodyOf, deadLetterQuery, listQuery, optionalBoolean, optionalText, pageQuery, queryOf, retriesQuery, storyQuery } from './admin-input';
import { transactionTarget } from './transaction-target';
import { AdminAccessGuard, authenticatedActor } from './admin-access.guard';
import { OperatorErrorsFilter } from './operator-errors.filter';
import { historyQuery } from './group-history';
import type { AuditEntry } from './operator-store';
import { requireText } from './operator-store';
import { OperatorService } from './operator.service';

interface Reply {
  status(code: number): Reply;
}

/**
 * Operator endpoints under /kafka-eo: the overview, dead letters and parked keys (list, show, their records'
 * bytes), replay a dead letter, release a parked key, discard a parked record, records on retry tiers, the
 * outbox's events set aside (retry, discard), a message's story and the audit log. Releases and replays are
 * carried out by the group's consumer; the request waits for it (up to `waitMs`): 200 done, 422 failed, 202
 * still queued or running. Every document is the one `kafka-eo ... --json` prints.
 */
@Controller(ADMIN_API_PATH)
@UseGuards(AdminAccessGuard)
@UseFilters(OperatorErrorsFilter)
export class KafkaExactlyOnceAdminController {
  constructor(
    private readonly operators: OperatorService,
    @Inject(ADMIN_OPTIONS) private readonly options: ResolvedAdminOptions,
  ) {}

  @Get('dead-letters')
  listDeadLetters(@Query() query: Record<string, unknown>) {
    return this.operators.store.listDeadLetters(deadLetterQuery(query));
  }

  @Get('dead-letters/:id')
  showDeadLetter(@Param('id') id: string, @Query() query: Record<string, unknown>) {
    const { topic } = queryOf(query, ['topic']);
    return this.operators.store.showDeadLetter(id, optionalText({ topic }, 'topic', 249));
  }

  @Post('dead-letters/:id/replay')
  async replay(@Param('id') id: string, @Query() query: Record<string, unknown>, @Body() raw: unknown, @Req() request: unknown, @Res({ passthrough: true }) reply: Reply) {
    queryOf(query);
    const body = bodyOf(raw, ['topic', 'actor', 'wait']);
    const entry = await this.operators.store.requestReplay(id, { topic: optionalText(body, 'topic', 249), ...this.actor(body, request) });
    return this.settle(entry, optionalBoolean(body, 'wait'), reply);
  }

  /** Records waiting on retry topics, the longest waiting first (`kafka-eo retries list`). */
  @Get('retries')
  async listRetries(@Query() query: Record<string, unknown>) {
    return { items: await this.operators.store.listRetrying(retriesQuery(query)) };
  }

  @Get('parked-keys')
  listParkedKeys(@Query() query: Record<string, unknown>) {
    return this.operators.store.listParkedKeys(listQuery(query));
  }

  /** A parked key with a page of its records (`limit`, `after`: the `next` of the previous page). */
  @Get('parked-keys/:topic/:key')
  showParkedKey(@Param('topic') topic: string, @Param('key') key: string, @Query() query: Record<string, unknown>) {
    return this.operators.store.showParkedKey(topic, key, pageQuery(query));
  }

  @Post('parked-keys/:topic/:key/release')
  async release(@Param('topic') topic: string, @Param('key') key: string, @Query() query: Record<string, unknown>, @Body() raw: unknown, @Req() request: unknown, @Res({ passthrough: true }) reply: Reply) {
    queryOf(query);
    const body = bodyOf(raw, ['actor', 'wait']);
    const entry = await this.operators.store.requestRelease(topic, key, this.actor(body, request));
    return this.settle(entry, optionalBoolean(body, 'wait'), reply);
  }

  @Post('parked-records/:seq/discard')
  @HttpCode(200)
  discard(@Param('seq') seq: string, @Query() query: Record<string, unknown>, @Body() raw: unknown, @Req() request: unknown) {
    queryOf(query);
    const body = bodyOf(raw, ['reason', 'actor']);
    return this.operators.store.discard(seq, requireText(body.reason, 'reason'), this.actor(body, request));
  }

  /** One parked record whole: key, headers and value decoded (`kafka-eo parked record <seq>`). */
  @Get('parked-records/:seq')
  parkedRecord(@Param('seq') seq: string, @Query() query: Record<string, unknown>) {
    queryOf(query);
    return this.operators.store.parkedRecord(seq);
  }

  /** A dead letter's record: key, every header and value decoded, the attempts' history (`kafka-eo dlq record <id>`). */
  @Get('dead-letters/:id/record')
  deadLetterRecord(@Param('id') id: string, @Query() query: Record<string, unknown>) {
    const { topic } = queryOf(query, ['topic']);
    return this.operators.store.deadLetterRecord(id, optionalText({ topic }, 'topic', 249));
  }

  /** The console's first page: group, partitions, publisher, outbox, health (`kafka-eo overview --url`). */
  @Get('overview')
  overview(@Query() query: Record<string, unknown>) {
    queryOf(query);
    return this.operators.overview.read();
  }

  /** The group's last day in samples, per topic or partition, for the console's charts (`kafka-eo history`). */
  @Get('history')
  history(@Query() query: Record<string, unknown>) {
    return this.operators.history(historyQuery(queryOf(query, ['range', 'topic', 'partition'])));
  }

  /** Operators' actions, newest first (`kafka-eo audit list`). */
  @Get('audit')
  audit(@Query() query: Record<string, unknown>) {
    return this.operators.store.listAudit(auditQuery(query));
  }

  /** Everything the library knows of a message, found by message id, key or coordinates (`kafka-eo story`). */
  @Get('story')
  story(@Query() query: Record<string, unknown>) {
    return this.operators.stories.story(storyQuery(query));
  }

  /** The outbox at a glance, with the session that holds the relay lock (`kafka-eo outbox status`). */
  @Get('outbox')
  async outbox(@Query() query: Record<string, unknown>) {
    queryOf(query);
    await this.requireOutbox();
    return this.operators.outbox.summary();
  }

  /** Outbox events set aside (`state`: set-aside, retried, discarded or all), as `kafka-eo outbox list`. */
  @Get('outbox/events')
  async outboxEvents(@Query() query: Record<string, unknown>) {
    const { state, limit } = queryOf(query, ['state', 'limit']);
    await this.requireOutbox();
    const count = limit === undefined ? undefined : /^[0-9]{1,4}$/.test(String(limit)) ? Number(limit) : NaN;
    return this.operators.outbox.list({ state: optionalText({ state }, 'state', 20), limit: count });
  }

  /** Puts a set-aside event back in the outbox, behind the events of its key written since (`kafka-eo outbox retry`). */
  @Post('outbox/events/:position/retry')
  @HttpCode(200)
  async retryOutboxEvent(@Param('position') position: string, @Query() query: Record<string, unknown>, @Body() raw: unknown, @Req() request: unknown) {
    queryOf(query);
    const body = bodyOf(raw, ['reason', 'actor']);
    await this.requireOutbox();
    return this.operators.outbox.retry(position, { ...this.actor(body, request), note: optionalText(body, 'reason', 2000) });
  }

  /** Gives a set-aside event up for good, with a reason (`kafka-eo outbox discard`). */
  @Post('outbox/events/:position/discard')
  @HttpCode(200)
  async discardOutboxEvent(@Param('position') position: string, @Query() query: Record<string, unknown>, @Body() raw: unknown, @Req() request: unknown) {
    queryOf(query);
    const body = bodyOf(raw, ['reason', 'actor']);
    await this.requireOutbox();
    return this.operators.outbox.discard(position, { ...this.actor(body, request), note: requireText(body.reason, 'reason', 2000) });
  }

  /**
   * Replaces the recorded outputs to `outputTopic` of one record (`topic`, `partition`, `offset`) or of one
   * operator replay (`replay`) by dead letters (reason `output-refused`): the way out when Kafka refuses them for
   * good. Done at once (200).
   */
  @Post('outputs/divert')
  @HttpCode(200)
  divert(@Query() query: Record<string, unknown>, @Body() raw: unknown, @Req() request: unknown) {
    queryOf(query);
    const body = bodyOf(raw, ['topic', 'partition', 'offset', 'replay', 'outputTopic', 'deadLetterTopic', 'reason', 'actor']);
    const target =
      body.replay !== undefined
        ? { replay: String(body.replay) }
        : { topic: requireText(body.topic, 'topic', 249), partition: Number(body.partition), offset: String(body.offset ?? '') };
    return this.operators.store.divertOutputs(target, body.outputTopic, body.reason, { ...this.actor(body, request), deadLetterTopic: optionalText(body, 'deadLetterTopic', 249) });
  }

  /**
   * The group's input and output partitions: last stable offset, high watermark and the transactions open where
   * they differ, whose they are and what the library does about them (`kafka-eo transactions list --url`).
   */
  @Get('transactions')
  transactions(@Query() query: Record<string, unknown>) {
    queryOf(query);
    return this.operators.transactions.read();
  }

  /**
   * Aborts a hanging transaction of another application on the group's partitions (WriteTxnMarkers), with a reason,
   * audited (`abort-transaction`): 200 done, 422 failed (the audit says why). 409 for a transaction its coordinator
   * still tracks, or the library's own (docs/console.md, "Open transactions").
   */
  @Post('transactions/abort')
  async abortTransaction(@Query() query: Record<string, unknown>, @Body() raw: unknown, @Req() request: unknown, @Res({ passthrough: true }) reply: Reply) {
    queryOf(query);
    const body = bodyOf(raw, ['topic', 'partition', 'producerId', 'startOffset', 'reason', 'actor']);
    const target = transactionTarget(body);
    const entry = await this.operators.transactions.abort(target, requireText(body.reason, 'reason', 2000), this.actor(body, request));
    reply.status(entry.state === 'done' ? 200 : 422);
    return entry;
  }

  @Get('operations/:id')
  operation(@Param('id') id: string, @Query() query: Record<string, unknown>) {
    queryOf(query);
    return this.operators.store.operation(id);
  }

  /**
   * Who acts: `actor` as AdminAccessGuard authenticated it (the application's `actorOf`, or the token), and the
   * name the caller gave of itself (the body's `actor`) apart, as `declaredActor`.
   */
  private actor(body: Record<string, unknown>, request: unknown): { actor: string; declaredActor?: string } {
    return { actor: authenticatedActor(request), declaredActor: optionalText(body, 'actor') };
  }

  private async requireOutbox(): Promise<void> {
    if (!(await this.operators.outbox.present())) throw new OperatorRequestError('not-found', 'this database has no outbox (its tables are made by an application with the module option "outbox")');
  }

  private async settle(entry: AuditEntry, wait: boolean | undefined, reply: Reply): Promise<AuditEntry> {
    const latest = wait === false ? entry : await this.operators.store.waitFor(entry.id, this.options.waitMs);
    reply.status(latest.state === 'done' ? 200 : latest.state === 'failed' ? 422 : 202);
    return latest;
  }
}
