/**
 * The parts of class-validator the edge uses, each required from its own file (ADR 0020). The
 * package's index loads every decorator it has, and with them `validator` and `libphonenumber-js`:
 * ~300 more files and ~3 MiB of heap in every control plane, for rules no DTO here uses. Types come
 * from the package's own declarations; the metadata storage is the package's global one either way.
 */
import type * as ClassValidator from 'class-validator';
import type { MetadataStorage, ValidationError, ValidatorOptions } from 'class-validator';

export type { ValidationError, ValidationOptions, ValidatorOptions } from 'class-validator';

type Package = typeof ClassValidator;

/** `name` from `class-validator/cjs/<file>.js`, typed as the index exports it. */
const part = <K extends keyof Package>(file: string, name: K): Package[K] =>
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  (require(`class-validator/cjs/${file}`) as Package)[name];

export const ArrayMaxSize = part('decorator/array/ArrayMaxSize', 'ArrayMaxSize');
export const IsArray = part('decorator/typechecker/IsArray', 'IsArray');
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
const getMetadataStorage = part('metadata/MetadataStorage', 'getMetadataStorage');

type Rules = ReturnType<MetadataStorage['getTargetValidationMetadatas']>;
type RulesByProperty = ReturnType<MetadataStorage['groupByPropertyName']>;

/**
 * class-validator looks a class's rules up again on every validation: it filters the class's own list,
 * walks every registered class for inherited rules, and groups the result by property (a few per cent
 * of the ingress's CPU per heartbeat). A class's rules change only when a decorator registers one, so
 * the lookup without groups or schema is remembered per class until the next registration. The
 * remembered lists are frozen: the executor and every other reader only read them.
 */
export function rememberRuleLookups(storage: MetadataStorage): void {
  const lookUp = storage.getTargetValidationMetadatas.bind(storage);
  const group = storage.groupByPropertyName.bind(storage);
  const register = storage.addValidationMetadata.bind(storage);
  // Key: the class, then `always` and `strictGroups` (the executor passes both, from its options).
  let rules = new Map<unknown, Map<string, Rules>>();
  // Per remembered list: a registration replaces the lists, so their groups go with them.
  const grouped = new WeakMap<Rules, RulesByProperty>();
  storage.addValidationMetadata = (metadata) => {
    rules = new Map();
    register(metadata);
  };
  storage.getTargetValidationMetadatas = (target, schema, always, strictGroups, groups) => {
    if (schema || (groups && groups.length > 0)) return lookUp(target, schema, always, strictGroups, groups);
    const flags = `${always}/${strictGroups}`;
    let byFlags = rules.get(target);
    const hit = byFlags?.get(flags);
    if (hit) return hit;
    const found = Object.freeze(lookUp(target, schema, always, strictGroups, groups)) as Rules;
    if (!byFlags) rules.set(target, (byFlags = new Map()));
    byFlags.set(flags, found);
    return found;
  };
  storage.groupByPropertyName = (metadata) => {
    const hit = grouped.get(metadata);
    if (hit) return hit;
    const byProperty = group(metadata);
    if (!Object.isFrozen(metadata)) return byProperty;
    for (const list of Object.values(byProperty)) Object.freeze(list);
    grouped.set(metadata, Object.freeze(byProperty));
    return byProperty;
  };
}

rememberRuleLookups(getMetadataStorage());

/** class-validator's own `validateSync(object, options)` (its index does exactly this). */
export function validateSync(object: object, options?: ValidatorOptions): ValidationError[] {
  return getFromContainer(Validator).validateSync(object, options);
}
