import { CanActivate, ExecutionContext, ForbiddenException, Injectable } from '@nestjs/common';
import type { PaymentRequested } from './payment.events';

/**
 * Refuses payments of frozen accounts (an account id starting with `frozen-`), saying why: the library does not
 * retry a guard's refusal, and the payment is dead-lettered with this message (its account parks).
 */
@Injectable()
export class FrozenAccountsGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const payment = context.switchToRpc().getData<PaymentRequested>();
    if (payment.accountId.startsWith('frozen-')) throw new ForbiddenException(`account ${payment.accountId} is frozen: payments to it are refused`);
    return true;
  }
}
