import { Type } from '@nestjs/common';
import { ApiProperty } from '@nestjs/swagger';

/** `@ApiProperty` options the response DTOs of both listeners share. */
export const UUID_V7_PROP = { format: 'uuid', description: 'UUIDv7' };
export const TIME_PROP = { format: 'date-time' };
export const NULLABLE_TIME_PROP = { type: 'string', format: 'date-time', nullable: true } as const;
export const integerProp = (description?: string) => ({
  type: 'integer' as const,
  ...(description ? { description } : {}),
});

/**
 * A list answer `{items, <cursor>?}` for the OpenAPI document: `nextAfter` / `nextBefore` is the
 * keyset cursor of the next page (null on the last one). Extend it to give the schema its name.
 */
export function ListOf(
  item: Type<unknown>,
  options: {
    description?: string;
    cursor?: 'nextAfter' | 'nextBefore';
    cursorType?: 'string' | 'integer';
  } = {},
): Type<{ readonly items: unknown[] }> {
  class List {
    readonly items!: unknown[];
  }
  ApiProperty({ type: () => [item], ...(options.description ? { description: options.description } : {}) })(
    List.prototype,
    'items',
  );
  if (options.cursor)
    ApiProperty({
      type: options.cursorType ?? 'string',
      nullable: true,
      description: `pass as ?${options.cursor === 'nextAfter' ? 'after' : 'before'}= for the next page`,
    })(List.prototype, options.cursor);
  return List;
}
