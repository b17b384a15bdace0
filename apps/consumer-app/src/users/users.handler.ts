import { Inject, Injectable } from '@nestjs/common';
import { EventContext, IdempotentHandler } from 'kafka-exactly-once';
import { DATA_LAYER, type DemoDataLayer } from '../data-layer/demo-store';
import { readAs } from '../formats/event-format';
import { DEMO_TOPICS } from '../topics/demo-topics';
import { UserSignedUpDto } from './user-signed-up.dto';

/** com.example.UserSignedUp (schemas/user-signed-up.v1.avsc). */
export interface UserSignedUp {
  userId: number;
  userEmail: string;
  timestamp: string;
}

/** Records new users and asks for their welcome email, once per sign-up. */
@Injectable()
export class UsersHandler {
  constructor(@Inject(DATA_LAYER) private readonly data: DemoDataLayer) {}

  @IdempotentHandler({ topic: DEMO_TOPICS.usersSignedUp, ...readAs('com.example.UserSignedUp', UserSignedUpDto) })
  async onUserSignedUp(event: UserSignedUp, ctx: EventContext<unknown>): Promise<void> {
    const inserted = await this.data.store(ctx.db).addUser({ userId: event.userId, email: event.userEmail, signedUpAt: new Date(event.timestamp) });
    if (!inserted) return; // already signed up: no second welcome
    ctx.emit(
      DEMO_TOPICS.welcomeEmail,
      { userId: event.userId, email: event.userEmail, requestedAt: new Date().toISOString() },
      { key: `user-${event.userId}` },
    );
  }
}
