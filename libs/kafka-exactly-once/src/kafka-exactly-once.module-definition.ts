import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { KafkaExactlyOnceModuleOptions } from './interfaces/kafka-exactly-once-options.interface';

export const {
  ConfigurableModuleClass: KafkaExactlyOnceConfigurableModule,
  MODULE_OPTIONS_TOKEN: KAFKA_EXACTLY_ONCE_OPTIONS,
  OPTIONS_TYPE: KAFKA_EXACTLY_ONCE_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: KAFKA_EXACTLY_ONCE_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<KafkaExactlyOnceModuleOptions>()
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: false }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();
