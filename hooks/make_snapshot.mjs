// Build step (run by hooks/pyodide_snapshot.py): a memory snapshot of Pyodide with the
// calculator's Python already imported, so the browser's worker restores it instead of
// starting Python and importing calc (what takes most of the worker's start).
//
//   node hooks/make_snapshot.mjs <pyodide dir> <calc bundle zip> <package dir> <out.gz>
//        [<stdlib zip> <lock json>]
//
// Python starts from the standard library and package lock the worker passes to Pyodide
// (hooks/pyodide_stdlib.py), so the snapshot holds the modules the page's Python has.
// Imports happen through runPython (no proxies held: a snapshot can only be taken with
// no JavaScript references into Python). The bundle's files live in Emscripten's file
// system, which the snapshot does not hold: the worker unpacks the bundle again.
import { readFileSync, writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { pathToFileURL } from "node:url";

const [pyodideDir, bundlePath, packageDir, outPath, stdlibPath, lockPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: make_snapshot.mjs <pyodide dir> <bundle zip> <package dir> <out.gz>");
  process.exit(2);
}
const dir = pyodideDir.endsWith("/") ? pyodideDir : pyodideDir + "/";
const { loadPyodide } = await import(pathToFileURL(dir + "pyodide.mjs").href);
const files = stdlibPath ? { stdLibURL: stdlibPath, lockFileURL: lockPath } : {};
const pyodide = await loadPyodide({ indexURL: dir, _makeSnapshot: true, env: { HOME: "/home/pyodide" },
                                    ...files, stdout: () => {}, stderr: (line) => console.error(line) });
pyodide.unpackArchive(new Uint8Array(readFileSync(bundlePath)), "zip", { extractDir: packageDir });
pyodide.runPython(`
import sys
sys.path.insert(0, ${JSON.stringify(packageDir)})
import calc, calc_view.session
`);
const snapshot = pyodide.makeMemorySnapshot();
writeFileSync(outPath, gzipSync(snapshot, { level: 9 }));
