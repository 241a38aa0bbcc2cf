import { OpenAPIObject } from '@nestjs/swagger';
import { OpenApiDocument } from './openapi-document';

describe('OpenApiDocument (built on first use, ADR 0020)', () => {
  const doc = { openapi: '3.1.0', info: { title: 't', version: '1' }, paths: {} } as OpenAPIObject;

  it('builds nothing until asked, then builds once and serves the same document', () => {
    const build = jest.fn(() => doc);
    const document = new OpenApiDocument();
    document.buildWith(build);
    expect(build).not.toHaveBeenCalled();
    expect(document.get()).toBe(doc);
    expect(document.get()).toBe(doc);
    expect(build).toHaveBeenCalledTimes(1);
  });

  it('refuses (unavailable, openapi_not_built) before it has a builder', () => {
    expect(() => new OpenApiDocument().get()).toThrow(
      expect.objectContaining({ reason: 'openapi_not_built' }) as Error,
    );
  });
});
