import { producerAppConfig } from './producer-app.config';

describe('producer-app settings', () => {
  it('reads KAFKA_CLIENT as the module driver (kafkajs by default) and refuses an unknown one, naming the choices', () => {
    expect(producerAppConfig({}).kafkaClient).toBe('kafkajs');
    expect(producerAppConfig({ KAFKA_CLIENT: '' }).kafkaClient).toBe('kafkajs');
    expect(producerAppConfig({ KAFKA_CLIENT: 'platformatic' }).kafkaClient).toBe('platformatic');
    expect(() => producerAppConfig({ KAFKA_CLIENT: 'librdkafka' })).toThrow('KAFKA_CLIENT must be one of kafkajs, platformatic, got "librdkafka"');
  });
});
