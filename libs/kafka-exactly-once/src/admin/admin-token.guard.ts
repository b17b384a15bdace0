import { CanActivate, ExecutionContext, Inject, Injectable, UnauthorizedException } from '@nestjs/common';
import { createHash, timingSafeEqual } from 'crypto';
import { ADMIN_OPTIONS, type ResolvedAdminOptions } from './admin.options';

const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/** Every admin request carries `Authorization: Bearer <token>`, compared in constant time. */
@Injectable()
export class AdminTokenGuard implements CanActivate {
  private readonly expected: Buffer;

  constructor(@Inject(ADMIN_OPTIONS) options: ResolvedAdminOptions) {
    this.expected = digest(options.token);
  }

  canActivate(context: ExecutionContext): boolean {
    const header = context.switchToHttp().getRequest<{ headers: Record<string, string | string[] | undefined> }>().headers.authorization;
    const match = typeof header === 'string' ? /^Bearer (.+)$/.exec(header) : null;
    // Digests of equal length, so that neither the length nor the content of the token leaks through timing.
    if (!match || !timingSafeEqual(digest(match[1]), this.expected)) {
      throw new UnauthorizedException('a valid admin token is required: Authorization: Bearer <token>');
    }
    return true;
  }
}
