// ESLint for the whole tree: JavaScript's and typescript-eslint's recommended rules, with the few exceptions
// this code base has reasons for (see each).
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["node_modules/**", ".state/**", "**/*.cpuprofile", "reports/mutation/**", ".stryker-tmp/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      ecmaVersion: 2024,
      sourceType: "module",
      globals: {
        process: "readonly",
        Buffer: "readonly",
        console: "readonly",
        setTimeout: "readonly",
        clearTimeout: "readonly",
        setInterval: "readonly",
        clearInterval: "readonly",
        setImmediate: "readonly",
        URL: "readonly",
        AbortController: "readonly",
        AbortSignal: "readonly",
        TextDecoder: "readonly",
        TextEncoder: "readonly",
        structuredClone: "readonly",
        NodeJS: "readonly",
        fetch: "readonly",
        performance: "readonly",
        queueMicrotask: "readonly",
      },
    },
    rules: {
      // Arguments and destructured values prefixed with _ are deliberately unused.
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }],
      // Sanitizers strip control characters on purpose.
      "no-control-regex": "off",
    },
  },
  {
    // An ES module import of node:http makes Node.js 24 read every export of it, WebSocket among them, which loads
    // its own copy of undici: 1.5 MiB of every server. The server takes the module with process.getBuiltinModule.
    files: ["src/**/*.ts", "bin/**/*.js"],
    rules: {
      "@typescript-eslint/no-restricted-imports": [
        "error",
        {
          paths: [
            { name: "node:http", allowTypeImports: true, message: 'use process.getBuiltinModule("node:http"): an import loads Node.js\'s undici' },
            { name: "http", allowTypeImports: true, message: 'use process.getBuiltinModule("node:http"): an import loads Node.js\'s undici' },
          ],
        },
      ],
    },
  },
  {
    // Tests poke at malformed input, which needs `any` now and then.
    files: ["test/**/*.ts", "bench/**/*.ts"],
    rules: { "@typescript-eslint/no-explicit-any": "off" },
  },
);
