import { consumerAppConfig } from './consumer-app.config';

describe('consumerAppConfig: DATA_LAYER', () => {
  it('is typeorm unless DATA_LAYER names another layer', () => {
    expect(consumerAppConfig({}).dataLayer).toBe('typeorm');
    expect(consumerAppConfig({ DATA_LAYER: '' }).dataLayer).toBe('typeorm');
    for (const layer of ['typeorm', 'prisma', 'drizzle', 'kysely']) expect(consumerAppConfig({ DATA_LAYER: layer }).dataLayer).toBe(layer);
  });

  it('refuses a layer it does not know, naming the ones it does', () => {
    expect(() => consumerAppConfig({ DATA_LAYER: 'mikro-orm' })).toThrow('DATA_LAYER must be one of typeorm, prisma, drizzle, kysely, got "mikro-orm"');
  });
});
