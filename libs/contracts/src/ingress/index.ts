// ADR 0056: one file per ingress call.
export * from './call';
export * from './session';
export * from './register';
export * from './heartbeat';
export * from './drain';
export * from './offline';
export * from './lease-fence';
export * from './lease-answer';
export * from './offers';
export * from './renew';
export * from './release';
