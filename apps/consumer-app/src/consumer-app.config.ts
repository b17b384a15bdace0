/** consumer-app's settings, read from the environment (the names of DESIGN §7). */
export interface ConsumerAppConfig {
  kafkaBrokers: string[];
  databaseUrl: string;
  httpPort: number;
  /** Interface to listen on: 127.0.0.1 unless HTTP_HOST says otherwise (0.0.0.0 inside a container). */
  httpHost: string;
}

export function consumerAppConfig(env: NodeJS.ProcessEnv = process.env): ConsumerAppConfig {
  const httpPort = Number(env.HTTP_PORT ?? 3001);
  if (!Number.isInteger(httpPort) || httpPort <= 0 || httpPort > 65535) {
    throw new Error(`HTTP_PORT must be a TCP port number, got "${env.HTTP_PORT}"`);
  }
  return {
    kafkaBrokers: (env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',').map((b) => b.trim()).filter(Boolean),
    databaseUrl: env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    httpPort,
    httpHost: env.HTTP_HOST ?? '127.0.0.1',
  };
}
