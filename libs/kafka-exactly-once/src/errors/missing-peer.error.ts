import { KafkaExactlyOnceError } from './kafka-exactly-once.error';

/** An optional peer dependency the application's configuration needs, and why it is refused. */
export interface MissingPeer {
  /** The package's name, e.g. `protobufjs`. */
  name: string;
  /** The versions kafka-exactly-once supports (its package.json's peerDependencies), e.g. `^7.0.0`. */
  range: string;
  /** The version found, when one outside `range` is installed; undefined when the package cannot be found at all. */
  installed?: string;
  /** What in the configuration needs it, e.g. `OrdersHandler.onOrder reads format protobuf`. */
  neededBy: string[];
}

/**
 * An optional peer dependency that the module's configuration is sure to need (a Protobuf topic needs protobufjs,
 * a JSON Schema topic ajv, a DTO validator class-validator...) is not installed, or not in a version the library
 * supports: thrown at boot, before anything is consumed, so that no record is refused for what an install fixes.
 * The message names each package, what needs it, the supported range and the install line.
 */
export class MissingPeerError extends KafkaExactlyOnceError {
  readonly retriable = false;

  constructor(readonly peers: MissingPeer[]) {
    super(missingPeersMessage(peers));
  }
}

/** `npm install "protobufjs@^7.0.0" "ajv@^8.0.0"`: quoted, since ranges may hold `>`, `<` and spaces. */
export function installLine(peers: ReadonlyArray<Pick<MissingPeer, 'name' | 'range'>>): string {
  return `npm install ${peers.map((p) => `"${p.name}@${p.range}"`).join(' ')}`;
}

function missingPeersMessage(peers: MissingPeer[]): string {
  const each = peers.map((p) => {
    const state = p.installed === undefined ? 'is not installed' : `${p.installed} is installed, and kafka-exactly-once supports ${p.range}`;
    return `${p.name} ${state} (needed: ${p.neededBy.join('; ')})`;
  });
  const what = peers.length === 1 ? 'an optional peer dependency of kafka-exactly-once that this configuration needs' : `${peers.length} optional peer dependencies of kafka-exactly-once that this configuration needs`;
  return `${each.join('; ')}: ${what}. Install ${peers.length === 1 ? 'it' : 'them'} (the versions kafka-exactly-once supports), then start again: ${installLine(peers)}`;
}
