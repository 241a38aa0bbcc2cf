/**
 * The parts of class-validator the edge uses, each required from its own file (ADR 0020). The
 * package's index loads every decorator it has, and with them `validator` and `libphonenumber-js`:
 * ~300 more files and ~3 MiB of heap in every control plane, for rules no DTO here uses. Types come
 * from the package's own declarations; the metadata storage is the package's global one either way.
 */
import type * as ClassValidator from 'class-validator';
import type { ValidationError, ValidatorOptions } from 'class-validator';

export type { ValidationError, ValidationOptions, ValidatorOptions } from 'class-validator';

type Package = typeof ClassValidator;

/** `name` from `class-validator/cjs/<file>.js`, typed as the index exports it. */
const part = <K extends keyof Package>(file: string, name: K): Package[K] =>
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  (require(`class-validator/cjs/${file}`) as Package)[name];

export const ArrayMaxSize = part('decorator/array/ArrayMaxSize', 'ArrayMaxSize');
export const IsArray = part('decorator/typechecker/IsArray', 'IsArray');
export const IsBoolean = part('decorator/typechecker/IsBoolean', 'IsBoolean');
export const IsIn = part('decorator/common/IsIn', 'IsIn');
export const IsInt = part('decorator/typechecker/IsInt', 'IsInt');
export const IsObject = part('decorator/typechecker/IsObject', 'IsObject');
export const IsOptional = part('decorator/common/IsOptional', 'IsOptional');
export const Max = part('decorator/number/Max', 'Max');
export const Min = part('decorator/number/Min', 'Min');
export const ValidateBy = part('decorator/common/ValidateBy', 'ValidateBy');
export const ValidateIf = part('decorator/common/ValidateIf', 'ValidateIf');
export const ValidateNested = part('decorator/common/ValidateNested', 'ValidateNested');

const Validator = part('validation/Validator', 'Validator');
const getFromContainer = part('container', 'getFromContainer');

/** class-validator's own `validateSync(object, options)` (its index does exactly this). */
export function validateSync(object: object, options?: ValidatorOptions): ValidationError[] {
  return getFromContainer(Validator).validateSync(object, options);
}
