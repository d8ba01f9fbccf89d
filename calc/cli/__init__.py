"""Command line: ``python -m calc {estimate,plan,sweep,presets,gpus}``; see :mod:`calc.cli.app`.

``main(argv) -> exit status`` is the entry point; subcommands and request sources register in
:mod:`calc.cli.registry`."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    from .app import main as run

    return run(argv)


def entry_point() -> int:
    """The wheel's console script ``gpu-finetune-calc``: the same CLI under its own name."""
    from .app import DIST_NAME, main as run

    return run(None, prog=DIST_NAME)


__all__ = ["entry_point", "main"]
