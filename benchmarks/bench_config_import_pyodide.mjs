// The config import inside Pyodide (the CPython the calculator's worker runs), under Node.
// Usage: node benchmarks/bench_config_import_pyodide.mjs BUNDLE.zip CONFIG.yml [runs]
// Prints the median and p95 of calc.config_import.import_config on the file, and checks
// that the result equals the one CPython printed (passed as JSON on stdin, optional).
import { readFileSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";

const dir = fileURLToPath(new URL("../node_modules/pyodide/", import.meta.url));
const { loadPyodide } = await import(pathToFileURL(dir + "pyodide.mjs").href);

const [bundlePath, configPath, runsText] = process.argv.slice(2);
const runs = Number(runsText || 100);
let out;
try {
  const pyodide = await loadPyodide({ indexURL: dir });
  pyodide.unpackArchive(new Uint8Array(readFileSync(bundlePath)), "zip", { extractDir: "/home/pyodide/calc-bundle" });
  pyodide.runPython("import sys; sys.path.insert(0, '/home/pyodide/calc-bundle')");
  pyodide.globals.set("config_text", readFileSync(configPath, "utf8"));
  out = pyodide.runPython(`
import json, time, statistics, yaml
from calc.config_import import import_config
import_config(config_text)
times = []
for _ in range(${runs}):
    t = time.perf_counter(); result = import_config(config_text); times.append((time.perf_counter() - t) * 1000)
times.sort()
json.dumps({"median_ms": statistics.median(times), "p95_ms": times[int(0.95 * (len(times) - 1))],
            "yaml": yaml.__version__, "libyaml": yaml.__with_libyaml__, "result": result})
`);
} catch (err) {
  console.error(String(err.message || err).slice(-2000));
  process.exit(1);
}
console.log(out);
