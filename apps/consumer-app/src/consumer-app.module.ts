import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { TypeOrmModule } from '@nestjs/typeorm';
import { consumerAppConfig } from './consumer-app.config';
import { HealthController } from './health/health.controller';

@Module({
  imports: [
    TypeOrmModule.forRootAsync({
      useFactory: () => ({ type: 'postgres', url: consumerAppConfig().databaseUrl, synchronize: false }),
    }),
    TerminusModule,
  ],
  controllers: [HealthController],
})
export class ConsumerAppModule {}
