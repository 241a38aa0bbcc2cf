import { parseEnvImport } from './env-var-import';

describe('env var import files (issue 31 item 2, ADR 0061)', () => {
  it('reads export lines: double quotes with escapes and line breaks, single quotes literal, bare values; reports the rest', () => {
    const file = [
      '#!/usr/bin/env bash',
      '# 京东',
      'export JD_COOKIE="pt_key=1;pt_pin=a&pt_key=2;pt_pin=b"',
      'export JD_UA=\'jdapp;iPhone "$HOME"\'',
      'export QL_NOTIFY=bark # 通知',
      'export MULTI="line one',
      'line \\"two\\""',
      'JD_X=1',
      'export 1BAD="x"',
      'export OPEN="never closed',
    ].join('\n');
    const { entries, skipped } = parseEnvImport(file, ['JD_UA', 'QL_NOTIFY']);
    expect(entries).toEqual([
      {
        name: 'JD_COOKIE',
        value: 'pt_key=1;pt_pin=a&pt_key=2;pt_pin=b',
        secret: true,
        remark: '',
        enabled: true,
      },
      { name: 'JD_UA', value: 'jdapp;iPhone "$HOME"', secret: false, remark: '', enabled: true },
      { name: 'QL_NOTIFY', value: 'bark', secret: false, remark: '', enabled: true },
      { name: 'MULTI', value: 'line one\nline "two"', secret: true, remark: '', enabled: true },
    ]);
    expect(skipped).toEqual([
      { at: 'line 8', reason: 'not an export line' },
      { at: 'line 9', reason: 'name: invalid_format' },
      { at: 'line 10', reason: 'unterminated quote' },
    ]);
  });

  it('reads QingLong’s JSON export: rows of one name joined by & in order, disabled rows only when none is enabled', () => {
    const json = JSON.stringify([
      { id: 1, name: 'JD_COOKIE', value: 'pt_key=1;pt_pin=a', remarks: '账号一', status: 0, position: 1 },
      { id: 2, name: 'JD_COOKIE', value: 'pt_key=2;pt_pin=b', remarks: '账号二', status: 0 },
      { id: 3, name: 'JD_COOKIE', value: 'pt_key=3;pt_pin=c', remarks: '过期', status: 1 },
      { id: 4, name: 'OLD_TOKEN', value: 'x', remarks: null, status: 1 },
      { id: 5, name: 'BAD-NAME', value: 'x' },
      { id: 6, name: 'PLAIN_LF', value: 'a\nb' },
    ]);
    const { entries, skipped } = parseEnvImport(json, ['PLAIN_LF']);
    expect(entries).toEqual([
      {
        name: 'JD_COOKIE',
        value: 'pt_key=1;pt_pin=a&pt_key=2;pt_pin=b',
        secret: true,
        remark: '账号一',
        enabled: true,
      },
      { name: 'OLD_TOKEN', value: 'x', secret: true, remark: '', enabled: false },
    ]);
    expect(skipped).toEqual([
      { at: 'item 5', reason: 'name: invalid_format' },
      { at: 'PLAIN_LF', reason: 'value: control_character' },
    ]);
  });

  it('a file that looks like JSON but is not is refused as a whole', () => {
    expect(() => parseEnvImport('[{"name": ')).toThrow('content: invalid_json');
  });
});
