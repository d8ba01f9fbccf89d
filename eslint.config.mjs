// ESLint flat config: ESLint's recommended rules on every JavaScript file of the project,
// with the globals of the place each file runs (page, Web Worker, Node). Globs, not file
// lists, so a new module under docs/assets/, hooks/ or tests/js/ is linted with no edit
// here; only classic (non-module) scripts are named. Run alone: npx eslint .
import js from "@eslint/js";
import globals from "globals";

// Web Workers (no DOM): the calculator's Pyodide worker, the wrapper of Material's search
// worker, the Pyodide smoke test's worker.
const WORKERS = ["docs/assets/**/worker.js", "docs/assets/**/workers/**/*.js",
                 "tests/browser_assets/**/worker.mjs"];

export default [
  {
    // Build output, installs and caches are not ours to lint.
    ignores: ["site/**", "build/**", "dist/**", "node_modules/**", ".venv/**", ".cache/**",
              "test-results/**", "artifacts/**"],
  },
  js.configs.recommended,
  {
    // Every file is an ES module unless it is one of the classic scripts below.
    files: ["**/*.js", "**/*.mjs"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module" },
    rules: {
      // A catch that drops its error on purpose still names it (`catch (err)`) so the
      // reader sees what is dropped; unused variables and arguments stay errors.
      "no-unused-vars": ["error", { caughtErrors: "none" }],
    },
  },
  {
    // The site's scripts and the browser test pages run in the page (workers excepted).
    files: ["docs/assets/**/*.js", "tests/browser_assets/**/*.js", "tests/browser_assets/**/*.mjs"],
    ignores: WORKERS,
    languageOptions: { globals: globals.browser },
  },
  {
    // The workers' own globals (self, importScripts, ...).
    files: WORKERS,
    languageOptions: { globals: globals.worker },
  },
  {
    // Classic <script>s of the theme override and the classic search worker (importScripts).
    files: ["docs/assets/calculator/boot.js", "docs/assets/calculator/search-defer.js",
            "docs/assets/javascripts/workers/**/*.js"],
    languageOptions: { sourceType: "script" },
  },
  {
    // Build hooks, Node's test-runner files, benchmarks, tools and this config run in Node.
    files: ["{hooks,benchmarks,tools,scripts}/**/*.{js,mjs}", "tests/js/**/*.{js,mjs}", "*.config.mjs"],
    languageOptions: { globals: globals.node },
  },
  {
    // The calculator's service worker: a template under hooks/, run in the browser.
    files: ["hooks/service_worker.js"],
    languageOptions: { globals: globals.serviceworker },
  },
];
