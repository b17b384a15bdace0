import { Injectable } from '@nestjs/common';
import { EventContext, IdempotentHandler } from 'kafka-exactly-once';
import { DEMO_TOPICS } from '../topics/demo-topics';
import { User } from './user.entity';

/** com.example.UserSignedUp (schemas/user-signed-up.v1.avsc). */
export interface UserSignedUp {
  userId: number;
  userEmail: string;
  timestamp: string;
}

/** Records new users and asks for their welcome email, once per sign-up. */
@Injectable()
export class UsersHandler {
  @IdempotentHandler({ topic: DEMO_TOPICS.usersSignedUp, schema: 'com.example.UserSignedUp' })
  async onUserSignedUp(event: UserSignedUp, ctx: EventContext): Promise<void> {
    const inserted = await ctx.manager
      .createQueryBuilder()
      .insert()
      .into(User)
      .values({ userId: event.userId, email: event.userEmail, signedUpAt: new Date(event.timestamp) })
      .orIgnore()
      .execute();
    if (inserted.identifiers.length === 0 || inserted.raw.length === 0) return; // already signed up: no second welcome
    ctx.emit(
      DEMO_TOPICS.welcomeEmail,
      { userId: event.userId, email: event.userEmail, requestedAt: new Date().toISOString() },
      { key: `user-${event.userId}` },
    );
  }
}
