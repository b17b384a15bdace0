/** What a value that is in no framing a reader knows starts with, for its decode failure's message. */
export function describeStart(bytes: Buffer): string {
  if (bytes.length === 0) return 'it is empty (0 bytes)';
  return `it starts with ${bytes.subarray(0, 4).toString('hex').replace(/(..)(?=.)/g, '$1 ')} (${bytes.length} byte${bytes.length === 1 ? '' : 's'})`;
}
