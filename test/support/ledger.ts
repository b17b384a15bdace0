/**
 * The small ledger of the library's in-process suites (@OrderedEvent, the microservice transport): entries of
 * an amount on an account, and the balance after each, as Avro schemas.
 */
export const ENTRY = {
  type: 'record',
  name: 'Entry',
  namespace: 'test.ledger',
  fields: [
    { name: 'entryId', type: 'string' },
    { name: 'account', type: 'string' },
    { name: 'amount', type: 'int' },
  ],
};

export const APPLIED = { type: 'record', name: 'Applied', namespace: 'test.ledger', fields: [{ name: 'entryId', type: 'string' }, { name: 'balance', type: 'int' }] };

export interface Entry {
  entryId: string;
  account: string;
  amount: number;
}

/** Entries over this amount need a row in `approvals`, else the suites' handlers refuse them for good. */
export const LIMIT = 1000;
