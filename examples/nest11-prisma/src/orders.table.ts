import { Injectable, type OnModuleInit } from '@nestjs/common';
import { PrismaService } from './prisma.module';

/**
 * The example's own tables (prisma/schema.prisma), created at boot so that it runs without the schema engine. A
 * real application runs `prisma migrate deploy` instead, which needs Prisma's schema engine (downloaded when
 * online).
 */
@Injectable()
export class OrdersTable implements OnModuleInit {
  constructor(private readonly prisma: PrismaService) {}

  async onModuleInit(): Promise<void> {
    await this.prisma.$executeRawUnsafe(
      'CREATE TABLE IF NOT EXISTS example_orders (order_id text PRIMARY KEY, customer_id text NOT NULL, amount_cents bigint NOT NULL)',
    );
    await this.prisma.$executeRawUnsafe('CREATE INDEX IF NOT EXISTS example_orders_customer_id_idx ON example_orders (customer_id)');
    await this.prisma.$executeRawUnsafe('CREATE TABLE IF NOT EXISTS example_order_requests (order_id text PRIMARY KEY, customer_id text NOT NULL)');
  }
}
