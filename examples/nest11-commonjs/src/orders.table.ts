import { Injectable, type OnModuleInit } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';

/** The example's own tables (a real application would use TypeORM migrations). */
@Injectable()
export class OrdersTable implements OnModuleInit {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  async onModuleInit(): Promise<void> {
    await this.dataSource.query(
      'CREATE TABLE IF NOT EXISTS example_orders (order_id text PRIMARY KEY, customer_id text NOT NULL, amount_cents bigint NOT NULL)',
    );
    await this.dataSource.query('CREATE TABLE IF NOT EXISTS example_order_requests (order_id text PRIMARY KEY, customer_id text NOT NULL)');
  }
}
