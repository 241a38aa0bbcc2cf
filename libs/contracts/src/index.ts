export * from './system-ports';
export * from './ingress-wire';
