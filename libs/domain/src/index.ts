export * from './errors';
export * from './strict';
export * from './canonical-json';
export * from './ids';
export * from './capabilities';
export * from './registration';
export * from './sessions';
export * from './ports';
