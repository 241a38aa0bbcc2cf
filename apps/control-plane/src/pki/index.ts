export * from './dev-pki';
