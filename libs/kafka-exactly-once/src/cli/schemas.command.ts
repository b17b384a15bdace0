import { existsSync } from 'fs';
import { OperatorRequestError } from '../errors/operator-request.error';
import { resolveOptions } from '../options/resolve-options';
import { SchemaRegistry } from '../formats/avro/schema-registry';
import { formatRegistry } from '../formats/writer-codecs';

export const SCHEMAS_USAGE = `  kafka-eo schemas register --topic T --schema NAME [--schemas-dir DIR] [--registry URL] [--strategy topic|record|topic-record]
                                      registers the current version of NAME (the last .avsc file of that name) under
                                      the topic's subject of a Schema Registry (the deploy-time step before writers run)`;

interface SchemasContext {
  verb: string | undefined;
  args: string[];
  text(name: string): string | undefined;
  env: NodeJS.ProcessEnv;
  print(document: unknown, human: () => string): void;
}

/**
 * `kafka-eo schemas register`: registers a schema of the schemas directory under a topic's subject, as a deploy
 * step (the library does not register at run time unless `schemaRegistry.autoRegister`). The registry from
 * --registry or SCHEMA_REGISTRY_URL; basic auth from SCHEMA_REGISTRY_USERNAME and SCHEMA_REGISTRY_PASSWORD, a
 * bearer token from SCHEMA_REGISTRY_TOKEN.
 */
export async function runSchemasCommand(ctx: SchemasContext): Promise<{ id: number; subject: string }> {
  if (ctx.verb !== 'register' || ctx.args.length !== 0) throw new OperatorRequestError('invalid', 'schemas register takes --topic and --schema (and --schemas-dir, --registry, --strategy)');
  const topic = ctx.text('topic');
  const name = ctx.text('schema');
  if (!topic) throw new OperatorRequestError('invalid', '--topic is required: the topic as written (with its prefix)', 'topic');
  if (!name) throw new OperatorRequestError('invalid', '--schema is required: the full name of the Avro record', 'schema');
  const url = ctx.text('registry') ?? ctx.env.SCHEMA_REGISTRY_URL;
  if (!url) throw new OperatorRequestError('invalid', '--registry (or SCHEMA_REGISTRY_URL) is required: the Schema Registry\'s base URL', 'registry');
  const directory = ctx.text('schemas-dir') ?? ctx.env.SCHEMAS_DIR ?? 'schemas';
  const options = cliOptions(directory, url, ctx.env, ctx.text('strategy'));
  const local = SchemaRegistry.fromDirectory(directory);
  if (!local.has(name)) throw new OperatorRequestError('not-found', `no schema named ${name} in ${directory} (known: ${local.names().join(', ')})`, 'schema');
  const schema = local.current(name);
  const remote = formatRegistry(options.schemaRegistry!, 'bigint');
  const subject = remote.subjectOf(topic, schema.name);
  const id = await remote.register(subject, schema);
  ctx.print({ id, subject, schema: schema.name, file: schema.file }, () => `registered ${schema.name} (${schema.file}) under subject ${subject}: id ${id}`);
  return { id, subject };
}

/** The module's own validation of the CLI's schema options, so that the CLI and the application agree on them. */
function cliOptions(directory: string, url: string | undefined, env: NodeJS.ProcessEnv, strategy?: string) {
  const auth = env.SCHEMA_REGISTRY_TOKEN
    ? { bearerToken: env.SCHEMA_REGISTRY_TOKEN }
    : env.SCHEMA_REGISTRY_USERNAME
      ? { username: env.SCHEMA_REGISTRY_USERNAME, password: env.SCHEMA_REGISTRY_PASSWORD ?? '' }
      : undefined;
  return resolveOptions({
    kafka: { clientId: 'kafka-eo-cli', brokers: ['127.0.0.1:9092'] },
    transactionalIdPrefix: 'kafka-eo-cli',
    schemas: { directory },
    ...(url ? { schemaRegistry: { url, auth, subjectNameStrategy: (strategy ?? 'topic') as 'topic' } } : {}),
  });
}

/**
 * The schemas `kafka-eo parked record` and `dlq record` decode values with: the directory of --schemas-dir or
 * SCHEMAS_DIR (else ./schemas when there is one), and the Schema Registry of --registry or SCHEMA_REGISTRY_URL
 * for values in its framing. Undefined when there is neither: values are then shown as bytes.
 */
export function decodingSchemas(text: (name: string) => string | undefined, env: NodeJS.ProcessEnv): SchemaRegistry | undefined {
  const given = text('schemas-dir') ?? env.SCHEMAS_DIR;
  const directory = given ?? (existsSync('schemas') ? 'schemas' : undefined);
  const url = text('registry') ?? env.SCHEMA_REGISTRY_URL;
  if (directory === undefined && url === undefined) return undefined;
  const options = cliOptions(directory ?? '.', url, env);
  const schemas = directory === undefined ? SchemaRegistry.fromSchemas([]) : SchemaRegistry.fromDirectory(directory, { longs: options.schemas.longs });
  if (options.schemaRegistry) schemas.remote = formatRegistry(options.schemaRegistry, options.schemas.longs);
  return schemas;
}
