// Build step (run by hooks/pyodide_stdlib.py): which files of Pyodide's standard library the
// calculator can import, so the site ships a python_stdlib.zip holding only those.
//
//   node hooks/stdlib_imports.mjs <pyodide dir> <calc bundle zip> <package dir> <out.json>
//
// Writes {"files": [...]}: the stdlib zip's entries to keep, those of every module loaded
// (sys.modules) once Pyodide has started and unpacked the bundle, and then
// - every module of the bundle is imported, and every stdlib module an import statement of
//   the bundle names (inside functions too);
// - calc has answered a few requests of each command, good and bad, and a config import and
//   export (what the stdlib imports late, inside a function, is then loaded);
// - a loaded stdlib module's own package parts named by any of its import statements are
//   imported (a late import inside its package), to a fixed point;
// - the codecs a page can meet (looked up by name, never imported by a statement) and
//   datetime's _strptime (imported from C) are imported by name.
// This script's own tools (ast, json, pkgutil, zipfile) are kept with them: a few kB.
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { SAMPLE_REQUESTS_PY } from "./sample_requests.mjs";

const [pyodideDir, bundlePath, packageDir, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: stdlib_imports.mjs <pyodide dir> <bundle zip> <package dir> <out.json>");
  process.exit(2);
}
const dir = pyodideDir.endsWith("/") ? pyodideDir : pyodideDir + "/";
const { loadPyodide } = await import(pathToFileURL(dir + "pyodide.mjs").href);
const pyodide = await loadPyodide({ indexURL: dir, env: { HOME: "/home/pyodide" },
                                    stdout: () => {}, stderr: (line) => console.error(line) });
pyodide.unpackArchive(new Uint8Array(readFileSync(bundlePath)), "zip", { extractDir: packageDir });
pyodide.globals.set("PACKAGE_DIR", packageDir);
const files = pyodide.runPython(`
import sys  # sys.modules already holds what Pyodide imported to start and unpack the bundle
import ast, importlib, json, os, pkgutil, zipfile

STDLIB = next(p for p in sys.path if p.endswith(".zip"))
# Imported by C code or looked up by name at run time, so no import statement names them:
# the codecs a page can meet (zip member names are cp437) and datetime's strptime.
BY_NAME = ["encodings." + c for c in (
    "aliases", "ascii", "charmap", "cp437", "latin_1", "utf_8", "utf_8_sig", "utf_16",
    "utf_16_le", "utf_16_be", "utf_32", "utf_32_le", "utf_32_be", "raw_unicode_escape",
    "unicode_escape")] + ["_strptime"]

sys.path.insert(0, PACKAGE_DIR)
tops = sorted(n for n in os.listdir(PACKAGE_DIR) if os.path.isdir(os.path.join(PACKAGE_DIR, n)))


def optional(name, missing_ok):
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as err:
        if not missing_ok(err.name or ""):
            raise


# every module of the bundle (a part the bundle leaves out, e.g. calc.cli, is no error)
in_bundle = lambda name: name.split(".")[0] in tops
for top in tops:
    optional(top, in_bundle)
    for info in pkgutil.walk_packages(sys.modules[top].__path__, top + "."):
        optional(info.name, in_bundle)

# every stdlib module an import statement of the bundle names, those inside functions too
named = set(BY_NAME)
for root, _, files in os.walk(PACKAGE_DIR):
    for file in files:
        if not file.endswith(".py"):
            continue
        with open(os.path.join(root, file), encoding="utf-8") as source:
            tree = ast.parse(source.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                named.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                named.add(node.module)
                named.update(node.module + "." + alias.name for alias in node.names)
for name in sorted(named):
    if not in_bundle(name):
        optional(name, lambda missing: True)  # "from x import name" names no module; _yaml

# What calc does at run time, on a few requests of each command (good and bad) and on a
# config import and export: what the stdlib imports late, inside a function (e.g.
# importlib.resources reading calc's data), is imported now.
import calc

${SAMPLE_REQUESTS_PY}
for command, extra in (("estimate", {}), ("plan", PLAN)):
    answers = [calc.run(command, {**setup, **extra}) for setup in SETUPS]
    answers += [calc.run(command, request) for request in BAD]
    if any("result" not in answer for answer in answers[: len(SETUPS)]):
        # the exercise must run calc through, not stop at a check of its input
        raise SystemExit(f"calc.run({command!r}) refused a sample request: {answers}")
try:
    from calc.config_import import browser
except ImportError:  # no config import in this bundle
    browser = None
if browser is not None:
    for text in ("base_model: meta-llama/Llama-3.1-8B\\nadapter: lora\\nsequence_len: 2048\\n",
                 '{"model_name_or_path": "meta-llama/Llama-3.1-8B", "max_seq_length": 1024}'):
        browser.handle("import", json.dumps({"text": text, "format": "auto"}))
    browser.handle("export", json.dumps({"request": SETUPS[0], "format": "auto"}))


def module_names(path, name, is_package):
    """The absolute names of the modules a source file's import statements name."""
    package = name if is_package else name.rpartition(".")[0]
    with zipfile.ZipFile(STDLIB) as archive:
        tree = ast.parse(archive.read(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


# A stdlib module that imports a part of its own package inside a function ("late import,
# to break a cycle", zipfile._path, importlib.resources.readers) gets that part too, to a
# fixed point.
seen = set()
while True:
    loaded = {n: m for n, m in list(sys.modules.items()) if n not in seen}
    if not loaded:
        break
    for name, module in loaded.items():
        seen.add(name)
        origin = getattr(module, "__file__", None) or ""
        if not origin.startswith(STDLIB + "/"):
            continue
        path = origin[len(STDLIB) + 1 :]
        for target in module_names(path, name, path.endswith("__init__.py")):
            if target.split(".")[0] == name.split(".")[0] and target not in sys.modules:
                try:
                    importlib.import_module(target)
                except Exception:  # not a module, or not for this platform (win32 only)
                    pass

with zipfile.ZipFile(STDLIB) as archive:
    entries = set(archive.namelist())
keep = set()
for name in sys.modules:
    module = sys.modules.get(name)
    origin = getattr(module, "__file__", None) or ""
    if not origin.startswith(STDLIB + "/"):
        continue
    path = origin[len(STDLIB) + 1 :]
    keep.add(path)
    # its packages' __init__ files and directory entries
    parts = path.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        stem = "/".join(parts[:i])
        keep.update(c for c in (stem + "/", stem + "/__init__.py") if c in entries)
json.dumps(sorted(keep))
`);
writeFileSync(outPath, JSON.stringify({ files: JSON.parse(files) }));
