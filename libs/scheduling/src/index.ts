export * from './scheduled-loop';
