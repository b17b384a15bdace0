import { Body, Controller, Get, HttpCode, Param, Post, Query, Req, Res, UseFilters, UseGuards } from '@nestjs/common';
import { OperatorRequestError } from '../../errors/operator-request.error';
import { ADMIN_API_PATH } from '../admin.options';
import { AdminAccessGuard, authenticatedActor } from '../admin-access.guard';
import { bodyOf, optionalText, queryOf } from '../admin-input';
import { OperatorErrorsFilter } from '../operator-errors.filter';
import { OperatorService } from '../operator.service';
import { FILTER_FIELDS } from './bulk-filter';
import type { BulkStart } from './bulk-operations';

interface Reply {
  status(code: number): Reply;
}

/**
 * Bulk actions under /kafka-eo/bulk (docs/console.md, Bulk actions): the dry run (a GET: it acts on nothing, so
 * the read-only token may run it), the start (201 new, 200 when the same bulk action is running already), the
 * list, one bulk action's progress, and its cancel. Every document is the one `kafka-eo bulk ... --json` prints.
 */
@Controller(ADMIN_API_PATH)
@UseGuards(AdminAccessGuard)
@UseFilters(OperatorErrorsFilter)
export class BulkController {
  constructor(private readonly operators: OperatorService) {}

  /** How many items the filter matches and the first ten (`kind`, `action` and the filter's fields as parameters). */
  @Get('bulk/dry-run')
  dryRun(@Query() query: Record<string, unknown>) {
    const { kind, action, ...filter } = queryOf(query, ['kind', 'action', ...FILTER_FIELDS]);
    return this.operators.bulk.dryRun(kind, action, filter);
  }

  @Post('bulk')
  async start(@Query() query: Record<string, unknown>, @Body() raw: unknown, @Req() request: unknown, @Res({ passthrough: true }) reply: Reply) {
    queryOf(query);
    const body = bodyOf(raw, ['kind', 'action', 'filter', 'reason', 'ratePerSecond', 'expect', 'actor']);
    const { operation, created } = await this.operators.bulk.start(body as unknown as BulkStart, { actor: authenticatedActor(request), declaredActor: optionalText(body, 'actor') });
    reply.status(created ? 201 : 200);
    return operation;
  }

  @Get('bulk')
  list(@Query() query: Record<string, unknown>) {
    const { limit, after } = queryOf(query, ['limit', 'after']);
    if (limit !== undefined && !/^[0-9]{1,3}$/.test(limit)) throw new OperatorRequestError('invalid', `limit must be an integer from 1 to 100, got "${limit.slice(0, 40)}"`, 'limit');
    return this.operators.bulk.list({ limit: limit === undefined ? undefined : Number(limit), after });
  }

  @Get('bulk/:id')
  show(@Param('id') id: string, @Query() query: Record<string, unknown>) {
    queryOf(query);
    return this.operators.bulk.get(id);
  }

  @Post('bulk/:id/cancel')
  @HttpCode(200)
  cancel(@Param('id') id: string, @Query() query: Record<string, unknown>, @Body() raw: unknown, @Req() request: unknown) {
    queryOf(query);
    const body = bodyOf(raw, ['actor']);
    return this.operators.bulk.cancel(id, { actor: authenticatedActor(request), declaredActor: optionalText(body, 'actor') });
  }
}
