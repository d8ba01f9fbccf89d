"""The site build: strict, bilingual, macros fatal, Pyodide bundled."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

import calc
from conftest import REPO_ROOT, parse_page, pyodide_info, run_mkdocs_build, site_pages

pytestmark = pytest.mark.build

HOOK_RUNTIME_FILES = (
    "pyodide.mjs",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "python_stdlib.zip",
    "pyodide-lock.json",
)


def page_url(rel_path: str) -> str:
    """Site-root URL path a built file is served at (``en/index.html`` -> ``/en/``)."""
    url = "/" + rel_path
    return url[: -len("index.html")] if url.endswith("/index.html") or url == "/index.html" else url


def counterpart(url: str, language: str) -> str:
    """The same page's URL path in ``language`` (Spanish at /, English at /en/)."""
    bare = url[len("/en") :] if url.startswith("/en/") else url
    return bare if language == "es" else "/en" + bare


def switcher_targets(site_dir: Path, rel_path: str) -> dict[str, str]:
    """Language switcher links of a built page, resolved to URL paths."""
    base = "http://site.test" + page_url(rel_path)
    links = parse_page(site_dir / rel_path).switcher
    return {lang: urlsplit(urljoin(base, href)).path for lang, href in links.items()}


# --- the real site -------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel_path", "language", "front_matter"),
    [
        ("index.html", "es", REPO_ROOT / "docs/es/index.md"),
        ("en/index.html", "en", REPO_ROOT / "docs/en/index.md"),
    ],
)
def test_home_page_built_in_each_language(built_site, rel_path, language, front_matter):
    page = parse_page(built_site / rel_path)
    meta = dict(
        re.findall(r"^(title|description): (.+)$", front_matter.read_text(encoding="utf-8"), re.M)
    )
    assert page.html_lang == language
    assert page.title.startswith(meta["title"])
    assert page.title.count(meta["title"]) == 1  # the site's name once, not "name - name"
    assert page.meta["description"] == meta["description"]


def test_docs_trees_mirror_each_other():
    def tree(language: str) -> set[str]:
        root = REPO_ROOT / "docs" / language
        return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}

    es, en = tree("es"), tree("en")
    assert "index.md" in es
    assert es - en == set(), "pages only in Spanish"
    assert en - es == set(), "pages only in English"


def test_every_page_exists_in_both_languages(built_site):
    pages = set(site_pages(built_site))
    spanish = {p for p in pages if not p.startswith("en/")}
    english = {p[len("en/") :] for p in pages if p.startswith("en/")}
    assert {"index.html", "404.html"} <= spanish
    assert spanish == english


@pytest.mark.parametrize(("rel_path", "language"), [("404.html", "es"), ("en/404.html", "en")])
def test_not_found_page_per_language(built_site, rel_path, language):
    # GitHub Pages serves the root 404.html: it must be the default language's.
    assert parse_page(built_site / rel_path).html_lang == language
    # its words come from the message catalogue (hooks/theme_words.py)
    from calc.catalogue import catalogue

    text = (built_site / rel_path).read_text(encoding="utf-8")
    for key, tag in (("site.not_found_title", "h1"), ("site.not_found_text", "p")):
        assert f"<{tag}>{catalogue(language).message(key)}</{tag}>" in text, key


def test_theme_toggle_speaks_the_page_language(built_site):
    """The light/dark switch is labelled in the page's language on every page (404 too)."""
    labels = {
        "es": {"Cambiar a modo oscuro", "Cambiar a modo claro"},
        "en": {"Switch to dark mode", "Switch to light mode"},
    }
    for rel_path in site_pages(built_site):
        html = (built_site / rel_path).read_text(encoding="utf-8")
        lang = parse_page(built_site / rel_path).html_lang
        found = set(re.findall(r'<label class="md-header__button md-icon" title="([^"]+)"', html))
        assert found == labels[lang], rel_path


def test_sitemap_under_every_language_root(built_site):
    # Material fetches sitemap.xml under each alternate language link.
    root_sitemap = (built_site / "sitemap.xml").read_text(encoding="utf-8")
    assert (built_site / "en" / "sitemap.xml").read_text(encoding="utf-8") == root_sitemap
    assert root_sitemap.count("<url>") == len(
        [p for p in site_pages(built_site) if not p.endswith("404.html")]
    )


def test_language_switcher_stays_on_the_same_page(built_site):
    pages = site_pages(built_site)
    checked = 0
    for rel_path in pages:
        if rel_path.endswith("404.html"):
            continue  # the 404 page has no counterpart URL of its own
        url = page_url(rel_path)
        targets = switcher_targets(built_site, rel_path)
        assert targets == {"es": counterpart(url, "es"), "en": counterpart(url, "en")}, rel_path
        checked += 1
    assert checked >= 2


def test_site_url_sub_path_reaches_the_switcher(tmp_path):
    # GitHub Pages serves a project site under /<repo>/: the home links of
    # the switcher must carry it (the Pages workflow sets SITE_URL).
    project = make_probe_project(tmp_path, "ok", "ok")
    result = run_mkdocs_build(
        project / "site",
        config_file=project / "mkdocs.yml",
        extra_env={"SITE_URL": "https://example.org/gpu-site/"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for rel_path in ("index.html", "en/index.html"):
        targets = switcher_targets(project / "site", rel_path)
        assert targets == {"es": "/gpu-site/", "en": "/gpu-site/en/"}


def test_serve_watches_all_code_and_data_the_build_reads():
    # `mkdocs serve` rebuilds on a change under a watched path: every project package the
    # macros and hooks import (calc, calc_view, accuracy...) and the measurements accuracy reads
    import ast

    import yaml

    imported = set()
    for path in [*(REPO_ROOT / "macros").glob("*.py"), *(REPO_ROOT / "hooks").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    own = {name for name in imported if (REPO_ROOT / name / "__init__.py").exists()}
    assert {"calc", "calc_view", "accuracy"} <= own
    config = yaml.load(
        (REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=yaml.BaseLoader
    )
    assert own | {"macros", "hooks", "validation"} <= set(config["watch"])


def test_macro_output_comes_from_calc(built_site):
    for rel_path in ("index.html", "en/index.html"):
        text = (built_site / rel_path).read_text(encoding="utf-8")
        assert f"<code>calc</code> {calc.__version__}" in text


def test_pyodide_runtime_copied_to_versioned_path(built_site):
    info = pyodide_info()
    assert re.fullmatch(r"314\.\d+\.\d+", info["version"]), info
    source = REPO_ROOT / "node_modules" / "pyodide"
    target = built_site / info["path"]
    for name in HOOK_RUNTIME_FILES:
        assert (target / name).read_bytes() == (source / name).read_bytes(), name
    # Only one runtime copy, not one per language.
    assert not (built_site / "en" / "assets" / "pyodide").exists()


def test_pyodide_snapshot_built_for_this_runtime_and_calc(built_site):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "snapshot_hook", REPO_ROOT / "hooks" / "pyodide_snapshot.py"
    )
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    info = pyodide_info()
    snapshots = sorted((built_site / "assets" / "calc").glob("*.snapshot.gz"))
    assert len(snapshots) == 1
    data = snapshots[0].read_bytes()
    assert data[:2] == b"\x1f\x8b" and len(data) > 1_000_000  # gzip of Pyodide's memory
    bundle = next((built_site / "assets" / "calc").glob("calc-*.zip")).relative_to(built_site)
    script = (REPO_ROOT / "hooks" / "make_snapshot.mjs").read_bytes()
    stdlib = next((built_site / info["path"]).glob("python_stdlib-*.zip")).relative_to(built_site)
    name = hook.snapshot_name(bundle.as_posix(), info["version"], script, stdlib.as_posix())
    assert snapshots[0].name == name
    # another calc, runtime, standard library or script: another name, so a stale snapshot
    # is never used
    stdlib = stdlib.as_posix()
    assert hook.snapshot_name("assets/calc/other.zip", info["version"], script, stdlib) != name
    assert hook.snapshot_name(bundle.as_posix(), "314.0.0", script, stdlib) != name
    assert hook.snapshot_name(bundle.as_posix(), info["version"], script + b" ", stdlib) != name
    assert hook.snapshot_name(bundle.as_posix(), info["version"], script, "other.zip") != name
    # the worker unpacks calc where the snapshot imported it from
    worker = (REPO_ROOT / "docs" / "assets" / "calculator" / "worker.js").read_text(
        encoding="utf-8"
    )
    assert f'const PACKAGE_DIR = "{hook.PACKAGE_DIR}";' in worker
    page = (built_site / "calculator" / "index.html").read_text(encoding="utf-8")
    assert f'data-snapshot="../assets/calc/{name}"' in page


def _load_hook(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "hooks" / f"{name}.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    return hook


def test_the_worker_gets_a_standard_library_cut_to_what_calc_needs(built_site):
    import zipfile

    info = pyodide_info()
    folder = built_site / info["path"]
    (trimmed,) = folder.glob("python_stdlib-*.zip")
    full = zipfile.ZipFile(folder / "python_stdlib.zip")
    cut = zipfile.ZipFile(trimmed)
    assert trimmed.stat().st_size < 0.6 * (folder / "python_stdlib.zip").stat().st_size
    names = set(cut.namelist())
    # a module a first start imports is there as bytecode (hooks/pyodide_precompile.mjs),
    # the others as Pyodide ships them
    sources = {name.removesuffix("c") for name in names}
    # what calc, its view, the YAML parser and Pyodide's start read; not what none of them do
    assert {"json/__init__.py", "dataclasses.py", "importlib/resources/__init__.py"} <= sources
    assert {"_pyodide/_base.py", "zipfile/__init__.py", "encodings/utf_8.py"} <= sources
    assert not {"sqlite3/__init__.py", "xml/__init__.py", "tomllib/__init__.py"} & sources
    assert {"sqlite3/__init__.py", "xml/__init__.py"} <= set(full.namelist())
    assert {
        "_pyodide/_base.pyc",
        "dataclasses.pyc",
        "json/__init__.pyc",
        "re/__init__.pyc",
    } <= names
    assert {"email/__init__.py", "argparse.py"} <= names  # imported later, if ever
    # not the frozen modules, which Python never reads from the zip
    assert not {"os.pyc", "site.pyc", "codecs.pyc"} & names
    magics = set()
    for name in names:
        if name.endswith(".pyc"):  # unchecked hash-based bytecode of a file Pyodide ships
            data = cut.read(name)
            magics.add(data[:4])
            assert int.from_bytes(data[4:8], "little") == 1 and name[:-1] in full.namelist()
        else:  # Pyodide's own files, unchanged
            assert cut.read(name) == full.read(name), name
    assert len(magics) == 1  # one Python compiled them all
    # named after its content: another cut, another URL
    assert (
        trimmed.name == f"python_stdlib-{hashlib.sha256(trimmed.read_bytes()).hexdigest()[:12]}.zip"
    )
    lock = json.loads((folder / "pyodide-lock-calc.json").read_text(encoding="utf-8"))
    full_lock = json.loads((folder / "pyodide-lock.json").read_text(encoding="utf-8"))
    assert lock == {"info": full_lock["info"], "packages": {}}
    for page, up in (("calculator/index.html", "../"), ("en/calculator/index.html", "../../")):
        html = (built_site / page).read_text(encoding="utf-8")
        assert f'data-stdlib="{up}{info["path"]}{trimmed.name}"' in html
        assert f'data-lock="{up}{info["path"]}pyodide-lock-calc.json"' in html


def test_the_calc_bundle_holds_what_a_first_start_imports_as_bytecode(built_site):
    import zipfile

    from hooks import calc_bundle

    (bundle,) = (built_site / "assets" / "calc").glob("calc-*.zip")
    names = set(zipfile.ZipFile(bundle).namelist())
    sources = dict(calc_bundle.bundle_members())
    # every file of the bundle, a module the worker imports to start (or calc to answer) as
    # bytecode, the config import and the YAML parser (a later click, if ever) as source
    assert {name.removesuffix("c") for name in names} == set(sources)
    assert {"calc/__init__.pyc", "calc/plan.pyc", "calc_view/session.pyc"} <= names
    assert {"calc/config_import/browser.py", "yaml/__init__.py"} <= names
    assert {"calc/data/gpus.csv", "calc/data/models.json"} <= names
    # named after its content, as the bundle of sources is
    digest = hashlib.sha256(bundle.read_bytes()).hexdigest()[:12]
    assert bundle.name == f"calc-{calc.__version__}-{digest}.zip"


def test_the_service_worker_keeps_the_runtime_and_the_calculator_pages_of_this_site(built_site):
    hook = _load_hook("service_worker")
    source = (built_site / hook.SW_PATH).read_text(encoding="utf-8")
    lists = re.findall(r"new Set\((\[.*?\])\.map", source)
    immutable, fresh = (json.loads(found) for found in lists)
    info = pyodide_info()
    stdlib = next((built_site / info["path"]).glob("python_stdlib-*.zip")).name
    bundle = next((built_site / "assets" / "calc").glob("calc-*.zip")).name
    assert {
        info["path"] + "pyodide.asm.wasm",
        info["path"] + stdlib,
        "assets/calc/" + bundle,
    } <= set(immutable)
    assert {"calculator/", "en/calculator/", "assets/calculator/worker.js"} <= set(fresh)
    for path in immutable + fresh:  # the site's own files, relative to the worker's scope
        assert "://" not in path and not path.startswith("/"), path
        assert (
            built_site / path / "index.html" if path.endswith("/") else built_site / path
        ).is_file()
    assert not any(p.endswith((".snapshot.gz", "python_stdlib.zip")) for p in immutable + fresh)
    build = re.search(r'const BUILD = "([0-9a-f]{12})";', source).group(1)
    assert build == hook.build_id(
        built_site, immutable + fresh, (REPO_ROOT / "hooks" / "service_worker.js").read_bytes()
    )
    for page, up in (("calculator/index.html", "../"), ("en/calculator/index.html", "../../")):
        assert f'data-sw="{up}{hook.SW_PATH}"' in (built_site / page).read_text(encoding="utf-8")


def test_a_changed_file_gives_the_service_worker_another_build(tmp_path):
    hook = _load_hook("service_worker")
    (tmp_path / "a.js").write_text("one", encoding="utf-8")
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "index.html").write_text("<p>", encoding="utf-8")
    first = hook.build_id(tmp_path, ["a.js", "p/"], b"template")
    (tmp_path / "p" / "index.html").write_text("<p>two", encoding="utf-8")
    assert hook.build_id(tmp_path, ["a.js", "p/"], b"template") != first
    assert hook.build_id(tmp_path, ["a.js", "p/"], b"template 2") != hook.build_id(
        tmp_path, ["a.js", "p/"], b"template"
    )


def test_build_fails_clearly_without_pyodide(tmp_path):
    project = make_probe_project(tmp_path, "# Probe", "# Probe", node_modules=False)
    result = run_mkdocs_build(project / "site", config_file=project / "mkdocs.yml")
    assert result.returncode != 0
    assert "Pyodide is not installed" in result.stdout + result.stderr


# --- throw-away projects with a probe page ------------------------------------

PROBE_MACROS = '''\
"""Test-only macros module: the site's macros plus probes."""
import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "site_macros_main", Path(__file__).parent / "macros" / "main.py"
)
_main = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_main)

from macros import site  # importable once main.py has run


def define_env(env):
    _main.define_env(env)

    @env.macro
    def probe_language():
        return site.page_language(env)

    @env.macro
    def probe_boom():
        raise RuntimeError("probe macro failed on purpose")
'''


def make_probe_project(
    tmp_path: Path, es_body: str, en_body: str, *, node_modules: bool = True
) -> Path:
    """A small copy of the project in ``tmp_path``: per language a plain home page and a
    ``probe/`` page, with the site's configuration, theme, hooks and macros.

    The docs' assets are copied (the real ``docs/`` is never touched), not its pages: the
    guides' tables make a whole build take minutes, and what a probe checks (macros,
    page language, switcher, strict mode, the hooks) needs none of them. Code and
    ``node_modules`` are symlinked. ``probe_macros.py`` loads the site's
    ``macros/main.py`` and adds ``probe_language()`` and ``probe_boom()``.
    """
    project = tmp_path / "project"
    shutil.copytree(REPO_ROOT / "docs", project / "docs", ignore=shutil.ignore_patterns("*.md"))
    for language, body in (("es", es_body), ("en", en_body)):
        home = project / "docs" / language / "index.md"
        home.write_text(
            f"---\ntitle: Home {language}\n---\n\n# Home {language}\n", encoding="utf-8"
        )
        probe = project / "docs" / language / "probe" / "index.md"
        probe.parent.mkdir(parents=True)
        probe.write_text(f"---\ntitle: Probe\n---\n\n{body}\n", encoding="utf-8")
    # the code the build imports and the paths `mkdocs serve` watches (which must exist)
    links = ["macros", "hooks", "calc", "calc_view", "accuracy", "validation", "overrides"]
    links += ["node_modules"] if node_modules else []
    for name in links:
        (project / name).symlink_to(REPO_ROOT / name, target_is_directory=True)
    (project / "probe_macros.py").write_text(PROBE_MACROS, encoding="utf-8")
    config = (REPO_ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "module_name: macros/main" in config
    config = config.replace("module_name: macros/main", "module_name: probe_macros")
    # the nav names the site's pages, which the copy leaves out: the home page alone
    nav = re.search(r"^nav:\n(?:  .*\n)+", config, re.M)
    assert nav and "- index.md" in nav.group(0)
    config = config.replace(nav.group(0), "nav:\n  - index.md\n")
    # The probe page is deliberately outside the nav; strict mode would refuse it otherwise.
    config += "\nnot_in_nav: |\n  probe/\n"
    (project / "mkdocs.yml").write_text(config, encoding="utf-8")
    return project


def build_probe(tmp_path: Path, es_body: str, en_body: str):
    project = make_probe_project(tmp_path, es_body, en_body)
    result = run_mkdocs_build(project / "site", config_file=project / "mkdocs.yml")
    return project / "site", result.returncode, result.stdout + result.stderr


def test_probe_page_builds_with_page_language_and_switcher(tmp_path):
    # Positive control for the failure cases below: the probe setup builds.
    body = "LANG={{ probe_language() }} CALC={{ calc_version() }} PYODIDE={{ pyodide.path }}"
    site_dir, returncode, log = build_probe(tmp_path, body, body)
    assert returncode == 0, log
    for rel_path, language in (("probe/index.html", "es"), ("en/probe/index.html", "en")):
        text = (site_dir / rel_path).read_text(encoding="utf-8")
        pyodide = pyodide_info()["path"]
        assert f"LANG={language} CALC={calc.__version__} PYODIDE={pyodide}" in text
        assert switcher_targets(site_dir, rel_path) == {"es": "/probe/", "en": "/en/probe/"}


@pytest.mark.parametrize(
    ("es_body", "en_body", "expected_in_log"),
    [
        pytest.param("{{ no_such_macro() }}", "ok", "no_such_macro", id="unknown-macro-es"),
        pytest.param("ok", "{{ no_such_macro() }}", "no_such_macro", id="unknown-macro-en"),
        pytest.param("{{ no_such_variable }}", "ok", "no_such_variable", id="undefined-variable"),
        pytest.param(
            "{{ probe_boom() }}", "ok", "probe macro failed on purpose", id="macro-raises"
        ),
        pytest.param("ok", "{{ calc_version(1) }}", "TypeError", id="macro-bad-arguments-en"),
        pytest.param("[broken](missing.md)", "ok", "missing.md", id="broken-link"),
    ],
)
def test_probe_page_error_fails_the_build(tmp_path, es_body, en_body, expected_in_log):
    site_dir, returncode, log = build_probe(tmp_path, es_body, en_body)
    assert returncode != 0, log
    assert expected_in_log in log
