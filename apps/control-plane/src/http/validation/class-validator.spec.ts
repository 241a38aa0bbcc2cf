import { IsInt, Min, validateSync } from './class-validator';
import { EDGE_VALIDATOR_OPTIONS } from './edge-validation.pipe';

/** The remembered rule lookups (rememberRuleLookups): same answers as class-validator's own. */
const failures = (object: object) =>
  validateSync(object, EDGE_VALIDATOR_OPTIONS).map((error) => [
    error.property,
    Object.keys(error.constraints ?? {}),
  ]);

describe('class-validator rule lookups', () => {
  it('a rule registered after a class was first validated applies from the next validation on', () => {
    class Late {
      @IsInt()
      count!: unknown;
    }
    const late = () => Object.assign(new Late(), { count: -1 });
    expect(failures(late())).toEqual([]);
    Min(0)(Late.prototype, 'count');
    expect(failures(late())).toEqual([['count', ['min']]]);
  });

  it('each class keeps its own rules, a subclass those of its parent too, however often it is validated', () => {
    class Parent {
      @IsInt()
      a!: unknown;
    }
    class Child extends Parent {
      @Min(1)
      b!: unknown;
    }
    const child = (a: unknown, b: unknown) => Object.assign(new Child(), { a, b });
    for (let i = 0; i < 3; i++) {
      expect(failures(child(1, 1))).toEqual([]);
      expect(failures(child('x', 0))).toEqual([
        ['b', ['min']],
        ['a', ['isInt']],
      ]);
      expect(failures(Object.assign(new Parent(), { a: 'x' }))).toEqual([['a', ['isInt']]]);
      expect(failures(Object.assign(new Parent(), { a: 1, b: 1 }))).toEqual([['b', ['whitelistValidation']]]);
    }
  });
});
