import { statementEffect } from './transaction-control';

const kind = (text: string) => statementEffect(text).kind;

describe('statementEffect', () => {
  it('reads the ORMs\' transaction control in every spelling, with comments before it and a trailing semicolon', () => {
    for (const text of ['BEGIN', 'begin;', 'BEGIN WORK', 'begin transaction', 'START TRANSACTION', '/* c */ begin', '-- c\nBEGIN']) expect(kind(text)).toBe('begin');
    expect(statementEffect('start transaction isolation level serializable')).toEqual({ kind: 'begin', modes: 'isolation level serializable' });
    for (const text of ['COMMIT', 'commit work', 'END', 'end transaction;', 'COMMIT AND NO CHAIN', '/* /* nested */ */ COMMIT', '-- a comment ended by a carriage return\rCOMMIT']) expect(kind(text)).toBe('commit');
    for (const text of ['ROLLBACK', 'rollback work', 'ABORT', 'abort transaction', '-- x\r\nROLLBACK']) expect(kind(text)).toBe('rollback');
  });

  it('refuses what would end or change the transaction beyond a savepoint', () => {
    for (const text of [
      'COMMIT AND CHAIN',
      'END AND CHAIN',
      'ROLLBACK AND CHAIN',
      'PREPARE TRANSACTION \'t1\'',
      'COMMIT PREPARED \'t1\'',
      'ROLLBACK PREPARED \'t1\'',
      'SET TRANSACTION READ ONLY',
      'SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE',
      'set transaction_isolation = serializable',
      'SET idle_in_transaction_session_timeout TO 0',
      'SET "idle_in_transaction_session_timeout" TO 0',
      'RESET idle_in_transaction_session_timeout',
      'RESET ALL',
      'SAVEPOINT kafka_eo_record',
      'RELEASE kafka_eo_record',
      'ROLLBACK TO SAVEPOINT "kafka_eo_tx_1"',
      'ROLLBACK WORK TO SAVEPOINT kafka_eo_record',
      'SAVEPOINT U&"kafka\\005feo_tx_1"',
      '-- x\rCOMMIT AND CHAIN',
    ]) {
      expect([text, kind(text)]).toEqual([text, 'refused']);
    }
  });

  it('refuses a text of several statements when any of them touches the transaction, however it is hidden', () => {
    for (const text of ['SELECT 1 -- x\r; COMMIT', 'SELECT 1; COMMIT', 'select 1 ;\n-- x\ncommit', "INSERT INTO t VALUES ('x'); ROLLBACK", 'BEGIN; INSERT INTO t VALUES (1); COMMIT', 'SELECT $$a$$; END', 'SELECT "a;b"; END;']) {
      expect([text, kind(text)]).toEqual([text, 'refused']);
    }
  });

  it('is not fooled by a keyword inside a string, an identifier, a dollar quote or a comment', () => {
    for (const text of [
      "INSERT INTO t VALUES ('; COMMIT')",
      "INSERT INTO t VALUES ('it''s; COMMIT')",
      'SELECT "; COMMIT" FROM t',
      'SELECT 1 -- ; COMMIT',
      'SELECT 1 /* ; COMMIT */',
      'DO $$BEGIN PERFORM 1; END$$',
      'DO $body$ BEGIN RAISE NOTICE \'x\'; COMMIT; END $body$',
      'SELECT a$b FROM t; SELECT 2',
      'SELECT $1::text; SELECT $2',
      'SAVEPOINT typeorm_1',
      'RELEASE SAVEPOINT typeorm_1',
      'ROLLBACK TO SAVEPOINT sp1',
      'ROLLBACK WORK TO SAVEPOINT sp1',
      'rollback transaction to sp1',
      'SET LOCAL statement_timeout = 0',
      "SELECT E'\\\\'; SELECT 1",
      'UPDATE t SET "end" = 1',
    ]) {
      expect([text, kind(text)]).toEqual([text, 'other']);
    }
  });

  it('takes the stricter reading where a backslash makes the end of a string depend on standard_conforming_strings', () => {
    // With standard_conforming_strings on, the string is '\' and COMMIT follows; off, the string goes on to the end.
    expect(kind("SELECT '\\'; COMMIT; --'")).toBe('refused');
    // An escape string reads the same either way.
    expect(kind("SELECT E'\\'; COMMIT; --'")).toBe('other');
  });

  it('reads unterminated strings, comments and dollar quotes to the end of the text (PostgreSQL refuses them itself)', () => {
    for (const text of ["SELECT 'abc", 'SELECT /* abc', 'SELECT $x$ abc', 'SELECT "abc']) expect(kind(text)).toBe('other');
  });

  it('is linear in the text: a megabyte of statements, quotes and comments is read in one pass', () => {
    const parts = ["INSERT INTO t VALUES ('x'';y');", '/* /* c */ */', 'SELECT $q$ ; $q$;', '-- c\n', 'SELECT "a""b";'];
    const text = parts.join(' ').repeat(Math.ceil(1_048_576 / 80));
    // Work that is quadratic would take minutes here; linear, milliseconds.
    const started = performance.now();
    expect(kind(text)).toBe('other');
    expect(kind(`${text} COMMIT`)).toBe('refused');
    expect(performance.now() - started).toBeLessThan(5000);
  });
});
