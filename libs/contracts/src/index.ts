export * from './system-ports';
export * from './ingress-wire';
export * from './env-settings';
export * from './execution-offer';
export * from './strict-json';
export * from './run-activation';
export * from './stdio';
export * from './entry-args';
