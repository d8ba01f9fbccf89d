"""Reading a pasted training config (YAML or JSON) safely into plain data.

YAML goes through PyYAML's pure-Python parser (the one that ships in the browser bundle
too, so the CLI and the calculator read a file the same way), with its ``SafeLoader``
narrowed further: no object construction (safe tags only), no timestamps (they come back
as the text written), and three bounds checked before anything is built:

- the text is at most :data:`MAX_BYTES` bytes;
- nodes nest at most :data:`MAX_DEPTH` deep (checked while scanning flow brackets and
  while composing, so a file of ten thousand ``[`` stops at the 65th);
- aliases expand to at most :data:`MAX_NODES` nodes in all (the "billion laughs" file
  composes to a few dozen nodes but expands to 10^9: it is refused before construction).

The result must be a mapping of JSON-like values (dict, list, str, int, float, bool,
None); anything else (``!!binary``, ``!!set``) is a coded error. ``yaml`` is imported on
first use: ``calc`` itself needs only the standard library, and without PyYAML a YAML file
gives the coded error ``yaml_unavailable`` (JSON still works).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..errors import InputError
from ..jsontypes import JsonObject

if TYPE_CHECKING:  # annotations only: PyYAML is imported on first use
    import yaml

MAX_BYTES = 256 * 1024  # the longest published example configs are under 20 KB
MAX_DEPTH = 64  # real configs nest 4-5 deep (torchtune's model/optimizer components)
MAX_NODES = 100_000  # nodes after alias expansion; a 200-line config has about 600

_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_loader_class: type[yaml.SafeLoader] | None = None


def yaml_unavailable() -> InputError:
    """The coded error of a YAML read or write without PyYAML installed."""
    return InputError(
        "yaml_unavailable", "config", None, "PyYAML is not installed; paste JSON or install pyyaml"
    )


def _safe_loader() -> type[yaml.SafeLoader]:
    """A ``yaml.SafeLoader`` subclass with depth and expansion bounds, built on first use."""
    global _loader_class
    if _loader_class is not None:
        return _loader_class
    try:
        import yaml
    except ImportError:
        raise yaml_unavailable() from None

    class BoundedSafeLoader(yaml.SafeLoader):
        # timestamps stay text: a date in a run name must not turn into a datetime
        yaml_implicit_resolvers = {
            first: [entry for entry in entries if entry[0] != _TIMESTAMP_TAG]
            for first, entries in yaml.SafeLoader.yaml_implicit_resolvers.items()
        }

        def __init__(self, stream: str | bytes) -> None:
            super().__init__(stream)
            self._depth = 0

        def fetch_flow_collection_start(self, token_class: type[yaml.Token]) -> None:
            # the scanner looks ahead for a possible simple key at every open bracket, which
            # costs time quadratic in the nesting: stop before the composer would
            if self.flow_level >= MAX_DEPTH:
                raise InputError("config_too_deep", "config", MAX_DEPTH)
            super().fetch_flow_collection_start(token_class)

        def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise InputError("config_too_deep", "config", MAX_DEPTH)
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    _loader_class = BoundedSafeLoader
    return _loader_class


def _expanded_size(root: yaml.Node) -> int:
    """Nodes of the document with every alias expanded, counted without expanding it:
    each distinct node's size is computed once (memoised by identity)."""
    import yaml

    sizes: dict[int, int] = {}
    # iterative post-order walk: a node's size is 1 + its children's sizes
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            sizes[key] = 1
            continue
        if done:
            total = 1
            for child in children:
                total += sizes[id(child)]
                if total > MAX_NODES:
                    raise InputError("config_alias_expansion", "config", MAX_NODES)
            sizes[key] = total
        else:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _check_plain(value: object, depth: int = 0) -> None:
    """JSON-like values only, nested at most MAX_DEPTH deep."""
    if depth > MAX_DEPTH:
        raise InputError("config_too_deep", "config", MAX_DEPTH)
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise InputError("config_unsupported_value", "config", type(key).__name__)
            _check_plain(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_plain(item, depth + 1)
    elif value is not None and not isinstance(value, (str, int, float, bool)):
        raise InputError("config_unsupported_value", "config", type(value).__name__)


def decode(raw: bytes | str) -> str:
    """Text of a config file: at most MAX_BYTES, UTF-8 (a BOM is dropped), no NUL bytes."""
    if isinstance(raw, str):
        if len(raw) > MAX_BYTES:  # characters >= bytes / 4; the exact check follows
            raw = raw.encode("utf-8", "surrogatepass")
        else:
            if "\x00" in raw:
                raise InputError("config_binary", "config", None)
            return raw[1:] if raw.startswith("\ufeff") else raw
    if not isinstance(raw, bytes):
        raise InputError("wrong_type", "config", type(raw).__name__)
    if len(raw) > MAX_BYTES:
        raise InputError("config_too_large", "config", len(raw), f"limit {MAX_BYTES} bytes")
    if b"\x00" in raw:
        raise InputError("config_binary", "config", None)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError("config_not_utf8", "config", None) from None


def looks_like_json(text: str) -> bool:
    return text.lstrip()[:1] in ("{", "[")


def load_json(text: str) -> object:
    try:
        data = json.loads(text)
    except RecursionError:
        raise InputError("config_too_deep", "config", MAX_DEPTH) from None
    except ValueError as err:
        raise InputError("config_syntax", "config", None, str(err)[:160]) from None
    _check_plain(data)
    return data


def load_yaml(text: str) -> object:
    loader_class = _safe_loader()
    import yaml

    loader = loader_class(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        _expanded_size(root)
        data = loader.construct_document(root)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise InputError("config_syntax", "config", None, (where + str(problem))[:160]) from None
    except RecursionError:
        raise InputError("config_too_deep", "config", MAX_DEPTH) from None
    finally:
        loader.dispose()
    _check_plain(data)
    return data


def load_text(raw: bytes | str) -> JsonObject:
    """Parse a config (JSON when it starts with ``{``, else YAML, of which JSON is a
    subset) into a dict; coded :class:`InputError` for anything else."""
    text = decode(raw)
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise InputError("config_too_large", "config", None, f"limit {MAX_BYTES} bytes")
    if not text.strip():
        raise InputError("config_empty", "config", None)
    data = load_json(text) if looks_like_json(text) else load_yaml(text)
    if not isinstance(data, dict):
        raise InputError("config_not_mapping", "config", type(data).__name__)
    return data
