import { BadRequestException, ForbiddenException, HttpException, InternalServerErrorException, RequestTimeoutException, ServiceUnavailableException } from '@nestjs/common';
import { RpcException } from '@nestjs/microservices';
import { isRefusal } from './handler-pipeline';

class TenantSuspended extends RpcException {}

describe('isRefusal', () => {
  it('takes what guards, pipes and interceptors throw to refuse an event: 4xx HttpExceptions and RpcExceptions', () => {
    expect(isRefusal(new ForbiddenException('tenant suspended'))).toBe(true);
    expect(isRefusal(new BadRequestException(['amountCents must be a number']))).toBe(true);
    expect(isRefusal(new RpcException('no such account'))).toBe(true);
    expect(isRefusal(new TenantSuspended('tenant suspended'))).toBe(true);
  });

  it('leaves out what passes: a timeout, a rate limit, a server error, anything else', () => {
    expect(isRefusal(new RequestTimeoutException())).toBe(false);
    expect(isRefusal(new HttpException('slow down', 429))).toBe(false);
    expect(isRefusal(new ServiceUnavailableException())).toBe(false);
    expect(isRefusal(new InternalServerErrorException())).toBe(false);
    expect(isRefusal(new Error('Forbidden resource'))).toBe(false);
    expect(isRefusal({ status: 'error', message: 'Forbidden resource' })).toBe(false);
    expect(isRefusal(undefined)).toBe(false);
  });
});
