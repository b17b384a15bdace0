import { Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { IdempotentHandlerOptions } from './decorators/idempotent-handler.decorator';
import type { OrderedEventOptions } from './decorators/ordered-event.decorator';
import { IDEMPOTENT_HANDLER_METADATA, ORDERED_EVENT_METADATA } from './kafka-exactly-once.constants';

@Injectable()
export class HandlerMetadataAccessor {
  constructor(private readonly reflector: Reflector) {}

  idempotentHandler(target: (...args: unknown[]) => unknown): IdempotentHandlerOptions | undefined {
    return this.reflector.get<IdempotentHandlerOptions | undefined>(IDEMPOTENT_HANDLER_METADATA, target);
  }

  orderedEvent(target: (...args: unknown[]) => unknown): OrderedEventOptions | undefined {
    return this.reflector.get<OrderedEventOptions | undefined>(ORDERED_EVENT_METADATA, target);
  }
}
