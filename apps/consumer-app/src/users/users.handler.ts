import { Injectable } from '@nestjs/common';
import { EventContext, IdempotentHandler } from 'kafka-exactly-once';
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
  @IdempotentHandler({ topic: DEMO_TOPICS.usersSignedUp, ...readAs('com.example.UserSignedUp', UserSignedUpDto) })
  async onUserSignedUp(event: UserSignedUp, ctx: EventContext): Promise<void> {
    // RETURNING says whether this sign-up inserted the row (an INSERT without it reports nothing either way).
    const inserted: unknown[] = await ctx.manager.query(
      `INSERT INTO users (user_id, email, signed_up_at) VALUES ($1, $2, $3) ON CONFLICT (user_id) DO NOTHING RETURNING user_id`,
      [event.userId, event.userEmail, new Date(event.timestamp)],
    );
    if (inserted.length === 0) return; // already signed up: no second welcome
    ctx.emit(
      DEMO_TOPICS.welcomeEmail,
      { userId: event.userId, email: event.userEmail, requestedAt: new Date().toISOString() },
      { key: `user-${event.userId}` },
    );
  }
}
