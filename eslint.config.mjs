import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', '.cache/**', 'var/**', 'coverage/**', 'bench/results/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        require: 'readonly',
        module: 'writable',
        __dirname: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'off',
      'no-restricted-syntax': [
        'error',
        {
          selector: "CallExpression[callee.object.name=/^(describe|it|test)$/][callee.property.name='only']",
          message: 'no .only in committed tests',
        },
      ],
    },
  },
  {
    files: ['libs/domain/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            '@nestjs/*',
            'typeorm',
            'class-validator',
            'node:fs',
            'fs',
            'node:net',
            'node:http',
            'node:https',
            'pg',
            'better-sqlite3',
          ],
        },
      ],
    },
  },
  {
    // The web console renders every API value as text (ADR 0052).
    files: ['apps/console/**/*.tsx', 'apps/console/**/*.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "JSXAttribute[name.name='dangerouslySetInnerHTML']",
          message: 'the console renders API values as text only',
        },
        {
          selector: 'AssignmentExpression[left.property.name=/^(innerHTML|outerHTML)$/]',
          message: 'the console renders API values as text only',
        },
        { selector: "CallExpression[callee.property.name='insertAdjacentHTML']", message: 'text only' },
        { selector: "CallExpression[callee.name='eval']", message: 'no eval (CSP)' },
      ],
    },
  },
  {
    // ADR 0049: on Node 20 every AbortSignal.any() leaves a WeakRef on its sources for their lifetime;
    // the worker's signals live as long as it does. linked-signal.ts links two and unlinks them.
    files: ['apps/**/*.ts', 'libs/**/*.ts'],
    rules: {
      'no-restricted-properties': [
        'error',
        {
          object: 'AbortSignal',
          property: 'any',
          message:
            'use linkedSignal() (apps/worker/src/lifecycle/linked-signal.ts) and unlink it once the call settled',
        },
      ],
    },
  },
  { files: ['**/*.js', '**/*.cjs'], rules: { '@typescript-eslint/no-require-imports': 'off' } },
);
