// Build step (run by hooks/pyodide_stdlib.py): the modules a first visit imports before its
// numbers are live, compiled to bytecode by Pyodide's own Python, so the browser does not
// compile them from source on every first start (most of Python's start in the worker).
//
//   node hooks/pyodide_precompile.mjs <pyodide dir> <stdlib zip> <lock json> <bundle zip>
//        <package dir> <out stdlib zip> <out bundle zip>
//
// Starts Pyodide as the worker does (the trimmed stdlib, the empty lock, the bundle unpacked
// in <package dir>), imports calc_view.session and calc, and has calc answer a few requests
// (good and bad, directly and through the worker's entry).
// Every module then loaded from the stdlib zip or the bundle is replaced, in a copy of its
// zip, by a sourceless .pyc (an unchecked hash-based pyc: zipimport and the file finder load
// it without looking for the source); the others stay as source, compiled if ever imported.
// The bytecode leaves out column positions (PYTHONNODEBUGRANGES: tracebacks lose their ^^^
// marks), and the stdlib's docstrings, except Pyodide's own packages, which read theirs;
// calc's are kept. Then a second Pyodide starts from the new zips, checks that those modules
// come from bytecode, and that calc's answers are the same, byte for byte; else it fails.
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { SAMPLE_REQUESTS_PY } from "./sample_requests.mjs";

const [pyodideDir, stdlibPath, lockPath, bundlePath, packageDir, outStdlib, outBundle] =
  process.argv.slice(2);
if (!outBundle) {
  console.error("usage: pyodide_precompile.mjs <pyodide dir> <stdlib zip> <lock json> "
                + "<bundle zip> <package dir> <out stdlib zip> <out bundle zip>");
  process.exit(2);
}
const dir = pyodideDir.endsWith("/") ? pyodideDir : pyodideDir + "/";
const { loadPyodide } = await import(pathToFileURL(dir + "pyodide.mjs").href);

async function start(stdlib, bundle) {
  const pyodide = await loadPyodide({
    indexURL: dir, stdLibURL: stdlib, lockFileURL: lockPath,
    env: { HOME: "/home/pyodide", PYTHONNODEBUGRANGES: "1" },
    stdout: () => {}, stderr: (line) => console.error(line),
  });
  pyodide.unpackArchive(new Uint8Array(readFileSync(bundle)), "zip", { extractDir: packageDir });
  pyodide.globals.set("PACKAGE_DIR", packageDir);
  // as worker.js: the bundle first on the path, calc's view and calc imported, then what the
  // first requests import late
  pyodide.runPython(`
import sys
sys.path.insert(0, PACKAGE_DIR)
import calc_view.session, calc
import json

${SAMPLE_REQUESTS_PY}
ANSWERS = [json.dumps(calc.run(command, {**setup, **extra}), sort_keys=True)
           for command, extra in (("plan", PLAN), ("estimate", {})) for setup in SETUPS]
if not all('"result"' in answer for answer in ANSWERS):
    raise SystemExit("calc refused a sample request: " + repr(ANSWERS))
ANSWERS += [json.dumps(calc.run("plan", request), sort_keys=True) for request in BAD]
# the worker's own entry (the page's strings are not at hand: the results tree is not drawn)
session = calc_view.session.Session("en", {})
ANSWERS += [session.handle("plan", json.dumps({**setup, **PLAN})) for setup in SETUPS[:1]]
STDLIB = next(p for p in sys.path if p.endswith(".zip"))
# the files of the loaded modules, (zip, member); not the frozen ones (os, site, codecs...),
# which Python has compiled in and never reads
LOADED = sorted({
    (root, origin[len(root) + 1:])
    for module in list(sys.modules.values())
    if getattr(getattr(module, "__spec__", None), "origin", None) != "frozen"
    for origin in [getattr(module, "__file__", None) or ""]
    for root in (STDLIB, PACKAGE_DIR)
    if origin.startswith(root + "/")
})
`);
  return pyodide;
}

const source = await start(stdlibPath, bundlePath);
source.FS.writeFile("/tmp/stdlib.zip", new Uint8Array(readFileSync(stdlibPath)));
source.FS.writeFile("/tmp/bundle.zip", new Uint8Array(readFileSync(bundlePath)));
source.runPython(`
import ast, importlib.util, marshal, zipfile


class NoDocstrings(ast.NodeTransformer):
    """The modules', classes' and functions' docstrings left out (as python -OO does)."""

    def _body(self, node):
        self.generic_visit(node)
        first = node.body[0] if node.body else None
        if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)):
            node.body = node.body[1:] or [ast.copy_location(ast.Pass(), first)]
        return node

    visit_Module = visit_ClassDef = visit_FunctionDef = visit_AsyncFunctionDef = _body


def pyc(source, path, docstrings):
    tree = ast.parse(source, path)
    if not docstrings:
        tree = NoDocstrings().visit(tree)
    code = compile(tree, path, "exec", dont_inherit=True)
    # unchecked hash-based: flags 0b01, then the source's hash (PEP 552)
    return (importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little")
            + importlib.util.source_hash(source) + marshal.dumps(code))


def compiled(src, dst, root, members, docstrings):
    with zipfile.ZipFile(src) as inp, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
        for info in inp.infolist():
            name, data = info.filename, inp.read(info)
            if name in members and name.endswith(".py"):
                data = pyc(data, root + "/" + name, docstrings(name))
                name += "c"
            copy = zipfile.ZipInfo(name, info.date_time)
            copy.compress_type = zipfile.ZIP_DEFLATED
            copy.external_attr = info.external_attr
            out.writestr(copy, data)


def members(root):
    return {name for zip_root, name in LOADED if zip_root == root}


compiled("/tmp/stdlib.zip", "/tmp/stdlib-out.zip", STDLIB, members(STDLIB),
         lambda name: name.startswith(("_pyodide/", "pyodide/")))
compiled("/tmp/bundle.zip", "/tmp/bundle-out.zip", PACKAGE_DIR, members(PACKAGE_DIR),
         lambda name: True)
`);
writeFileSync(outStdlib, source.FS.readFile("/tmp/stdlib-out.zip"));
writeFileSync(outBundle, source.FS.readFile("/tmp/bundle-out.zip"));

// The same start from the compiled zips: the same modules, from bytecode, the same answers.
const again = await start(outStdlib, outBundle);
const expected = source.globals.get("LOADED").toJs().map(([root, name]) => `${root}/${name}c`);
const loaded = new Set(again.globals.get("LOADED").toJs().map(([root, name]) => `${root}/${name}`));
const missing = expected.filter((file) => !loaded.has(file));
if (missing.length) {
  console.error(`not loaded from bytecode: ${missing.join(", ")}`);
  process.exit(1);
}
const before = source.globals.get("ANSWERS").toJs();
const after = again.globals.get("ANSWERS").toJs();
if (JSON.stringify(before) !== JSON.stringify(after)) {
  console.error("calc answers differently from bytecode");
  process.exit(1);
}
console.log(JSON.stringify({ compiled: expected.length }));
