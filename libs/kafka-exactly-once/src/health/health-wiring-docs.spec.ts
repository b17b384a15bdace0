import { readFileSync } from 'fs';
import { join } from 'path';
import * as health from './index';

const ROOT = join(__dirname, '../../../..');

/**
 * Every health indicator the library exports is in the health wiring the README and docs/protocol.md show: an
 * application that copies it checks every part it enables (an outbox whose events stop moving was missing).
 */
describe('the health wiring in the docs', () => {
  const indicators = Object.keys(health).filter((name) => name.endsWith('HealthIndicator'));

  it('names every exported indicator', () => {
    expect(indicators.sort()).toEqual(['InboxHealthIndicator', 'KafkaHealthIndicator', 'OutboxHealthIndicator', 'PublisherHealthIndicator']);
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const protocol = readFileSync(join(ROOT, 'docs/protocol.md'), 'utf8');
    const wiring = protocol.slice(protocol.indexOf('## Health'), protocol.indexOf('\n## ', protocol.indexOf('## Health') + 1));
    const example = wiring.slice(wiring.indexOf('```ts'), wiring.indexOf('```', wiring.indexOf('```ts') + 5));
    for (const name of indicators) {
      expect({ name, inReadme: readme.includes(name) }).toEqual({ name, inReadme: true });
      expect({ name, inProtocolExample: example.includes(name) }).toEqual({ name, inProtocolExample: true });
    }
  });
});
