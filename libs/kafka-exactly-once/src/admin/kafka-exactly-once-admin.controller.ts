import { Body, Controller, Get, HttpCode, Param, Post, Query, Res, UseFilters, UseGuards } from '@nestjs/common';
import { Inject } from '@nestjs/common';
import { ADMIN_OPTIONS, type ResolvedAdminOptions } from './admin.options';
import { bodyOf, listQuery, optionalBoolean, optionalText } from './admin-input';
import { AdminTokenGuard } from './admin-token.guard';
import { OperatorErrorsFilter } from './operator-errors.filter';
import type { AuditEntry } from './operator-store';
import { requireText } from './operator-store';
import { OperatorService } from './operator.service';

interface Reply {
  status(code: number): Reply;
}

/**
 * Operator endpoints under /kafka-eo: dead letters and parked keys (list, show), replay a dead letter,
 * release a parked key, discard a parked record. Releases and replays are carried out by the group's
 * consumer; the request waits for it (up to `waitMs`): 200 done, 422 failed, 202 still queued or running.
 */
@Controller('kafka-eo')
@UseGuards(AdminTokenGuard)
@UseFilters(OperatorErrorsFilter)
export class KafkaExactlyOnceAdminController {
  constructor(
    private readonly operators: OperatorService,
    @Inject(ADMIN_OPTIONS) private readonly options: ResolvedAdminOptions,
  ) {}

  @Get('dead-letters')
  listDeadLetters(@Query() query: Record<string, unknown>) {
    return this.operators.store.listDeadLetters(listQuery(query));
  }

  @Get('dead-letters/:id')
  showDeadLetter(@Param('id') id: string, @Query() query: Record<string, unknown>) {
    const { topic } = bodyOf(query, ['topic']);
    return this.operators.store.showDeadLetter(id, optionalText({ topic }, 'topic', 249));
  }

  @Post('dead-letters/:id/replay')
  async replay(@Param('id') id: string, @Body() raw: unknown, @Res({ passthrough: true }) reply: Reply) {
    const body = bodyOf(raw, ['topic', 'actor', 'wait']);
    const entry = await this.operators.store.requestReplay(id, { topic: optionalText(body, 'topic', 249), actor: optionalText(body, 'actor') });
    return this.settle(entry, optionalBoolean(body, 'wait'), reply);
  }

  /** Records waiting on retry topics, the longest waiting first (`kafka-eo retries list`). */
  @Get('retries')
  async listRetries(@Query() query: Record<string, unknown>) {
    return { items: await this.operators.store.listRetrying(listQuery(query)) };
  }

  @Get('parked-keys')
  listParkedKeys(@Query() query: Record<string, unknown>) {
    return this.operators.store.listParkedKeys(listQuery(query));
  }

  @Get('parked-keys/:topic/:key')
  showParkedKey(@Param('topic') topic: string, @Param('key') key: string) {
    return this.operators.store.showParkedKey(topic, key);
  }

  @Post('parked-keys/:topic/:key/release')
  async release(@Param('topic') topic: string, @Param('key') key: string, @Body() raw: unknown, @Res({ passthrough: true }) reply: Reply) {
    const body = bodyOf(raw, ['actor', 'wait']);
    const entry = await this.operators.store.requestRelease(topic, key, { actor: optionalText(body, 'actor') });
    return this.settle(entry, optionalBoolean(body, 'wait'), reply);
  }

  @Post('parked-records/:seq/discard')
  @HttpCode(200)
  discard(@Param('seq') seq: string, @Body() raw: unknown) {
    const body = bodyOf(raw, ['reason', 'actor']);
    return this.operators.store.discard(seq, requireText(body.reason, 'reason'), { actor: optionalText(body, 'actor') });
  }

  /**
   * Replaces the recorded outputs to `outputTopic` of one record (`topic`, `partition`, `offset`) or of one
   * operator replay (`replay`) by dead letters (reason `output-refused`): the way out when Kafka refuses them for
   * good. Done at once (200).
   */
  @Post('outputs/divert')
  @HttpCode(200)
  divert(@Body() raw: unknown) {
    const body = bodyOf(raw, ['topic', 'partition', 'offset', 'replay', 'outputTopic', 'deadLetterTopic', 'reason', 'actor']);
    const target =
      body.replay !== undefined
        ? { replay: String(body.replay) }
        : { topic: requireText(body.topic, 'topic', 249), partition: Number(body.partition), offset: String(body.offset ?? '') };
    return this.operators.store.divertOutputs(target, body.outputTopic, body.reason, { actor: optionalText(body, 'actor'), deadLetterTopic: optionalText(body, 'deadLetterTopic', 249) });
  }

  @Get('operations/:id')
  operation(@Param('id') id: string) {
    return this.operators.store.operation(id);
  }

  private async settle(entry: AuditEntry, wait: boolean | undefined, reply: Reply): Promise<AuditEntry> {
    const latest = wait === false ? entry : await this.operators.store.waitFor(entry.id, this.options.waitMs);
    reply.status(latest.state === 'done' ? 200 : latest.state === 'failed' ? 422 : 202);
    return latest;
  }
}
