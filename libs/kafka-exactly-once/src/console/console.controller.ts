import { CanActivate, Controller, ExecutionContext, Get, Header, Inject, Injectable, Req, UseFilters, UseGuards, type Type } from '@nestjs/common';
import { AdminAccessGuard } from '../admin/admin-access.guard';
import { ADMIN_API_PATH, ADMIN_OPTIONS, type ResolvedAdminOptions, type ResolvedConsoleOptions } from '../admin/admin.options';
import { OperatorErrorsFilter } from '../admin/operator-errors.filter';
import { OperatorRequestError } from '../errors/operator-request.error';
import { CONSOLE_ASSETS } from './console-assets.generated';

/**
 * The console's Content-Security-Policy: its own script and style only (no inline script or style, no eval),
 * requests only to its own origin, nothing framed, no form posted anywhere, and Trusted Types required, so that
 * no string can ever reach the page as HTML even if a line of its code tried.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join('; ');

/** Headers of every response of the console (page and assets). */
const SECURITY_HEADERS: Array<[string, string]> = [
  ['Content-Security-Policy', CONSOLE_CSP],
  ['X-Content-Type-Options', 'nosniff'],
  ['Referrer-Policy', 'no-referrer'],
  ['X-Frame-Options', 'DENY'],
  ['Cross-Origin-Opener-Policy', 'same-origin'],
  ['Cross-Origin-Resource-Policy', 'same-origin'],
  ['Permissions-Policy', 'camera=(), microphone=(), geolocation=(), payment=(), usb=()'],
  ['Cache-Control', 'no-store'],
];

/** The console's page and assets: open to all with tokens (they hold no data), behind the application's guard with one. */
@Injectable()
export class ConsoleAccessGuard implements CanActivate {
  constructor(
    @Inject(ADMIN_OPTIONS) private readonly options: ResolvedAdminOptions,
    private readonly access: AdminAccessGuard,
  ) {}

  canActivate(context: ExecutionContext): boolean | Promise<boolean> {
    return this.options.access.kind === 'guard' ? this.access.canActivate(context) : true;
  }
}

const escapeAttribute = (text: string) => text.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/**
 * The page's own address as the request reached it (with the application's global prefix, if any), ending in
 * `/`: the route matched, so it is the console's path; anything else falls back to the configured path. The page's
 * script, style and API are addressed from it, so it must be a path of this origin: one that starts with `//` is,
 * to a browser, the address of another host (`//host/path`), and a server that ignores duplicate slashes (Fastify's
 * `ignoreDuplicateSlashes`) routes `//kafka-eo` here; it is refused (OperatorRequestError, a 400).
 */
export function consoleBaseOf(request: { originalUrl?: string; url?: string }, path: string): string {
  const pathname = String(request.originalUrl ?? request.url ?? '').split(/[?#]/)[0].replace(/\/+$/, '');
  if (/^[/\\]{2}/.test(pathname)) {
    throw new OperatorRequestError(
      'invalid',
      `the console was asked for at an address that starts with "${pathname.slice(0, 2)}", which a browser reads as another host's: open it at /${path}/ (after the application's global prefix, if it has one)`,
    );
  }
  const plain = /^[A-Za-z0-9._~/-]*$/.test(pathname) && pathname.endsWith(`/${path}`);
  return `${plain ? pathname : `/${path}`}/`;
}

/** The page: the template with its addresses and settings filled in (as attributes, escaped: no inline script). */
export function consolePage(base: string, consoleOptions: ResolvedConsoleOptions, admin: ResolvedAdminOptions): string {
  const prefix = base.slice(0, base.length - consoleOptions.path.length - 1);
  const settings = {
    api: `${prefix}${ADMIN_API_PATH}/`,
    auth: admin.access.kind,
    refreshMs: consoleOptions.refreshMs,
    actorFromApplication: admin.actorOf !== undefined,
  };
  return CONSOLE_ASSETS['index.html'].body
    .replace(/\{\{base\}\}/g, escapeAttribute(base))
    .replace('{{settings}}', escapeAttribute(JSON.stringify(settings)));
}

/**
 * The console's controller at the configured path (routes are fixed when the module is built): `GET <path>` (and
 * `<path>/`) the page, `GET <path>/assets/...` its script, style and icon. Every asset ships in the package.
 */
export function consoleController(consoleOptions: ResolvedConsoleOptions): Type<unknown> {
  @Controller(consoleOptions.path)
  @UseGuards(ConsoleAccessGuard)
  @UseFilters(OperatorErrorsFilter)
  class KafkaExactlyOnceConsoleController {
    constructor(@Inject(ADMIN_OPTIONS) private readonly options: ResolvedAdminOptions) {}

    @Get()
    @Header('Content-Type', 'text/html; charset=utf-8')
    @SecurityHeaders()
    page(@Req() request: { originalUrl?: string; url?: string }): string {
      return consolePage(consoleBaseOf(request, consoleOptions.path), consoleOptions, this.options);
    }

    @Get('assets/console.js')
    @Header('Content-Type', CONSOLE_ASSETS['console.js'].type)
    @SecurityHeaders()
    script(): string {
      return CONSOLE_ASSETS['console.js'].body;
    }

    @Get('assets/console.css')
    @Header('Content-Type', CONSOLE_ASSETS['console.css'].type)
    @SecurityHeaders()
    style(): string {
      return CONSOLE_ASSETS['console.css'].body;
    }

    @Get('assets/icon.svg')
    @Header('Content-Type', CONSOLE_ASSETS['icon.svg'].type)
    @SecurityHeaders()
    icon(): string {
      return CONSOLE_ASSETS['icon.svg'].body;
    }
  }
  return KafkaExactlyOnceConsoleController;
}

/** The security headers, as Nest's @Header decorators (the same on Express and Fastify). */
function SecurityHeaders(): MethodDecorator {
  return (target, key, descriptor) => {
    for (const [name, value] of SECURITY_HEADERS) Header(name, value)(target, key, descriptor);
    return descriptor;
  };
}
