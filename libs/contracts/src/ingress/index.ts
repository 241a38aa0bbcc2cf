// ADR 0056: one file per ingress call.
export * from './call';
export * from './session';
export * from './register';
export * from './heartbeat';
export * from './drain';
export * from './offline';
