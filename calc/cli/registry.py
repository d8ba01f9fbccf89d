"""Where subcommands and request sources register.

A subcommand is a :class:`Command` in :data:`COMMANDS` (shown in that order); a source of a
base request (``--request FILE`` here; a training-config importer can add ``--config FILE``) is
a :class:`RequestSource` in :data:`REQUEST_SOURCES`. Sources are merged in list order, later
keys winning, and the field flags override them all (:func:`calc.cli.commands.build_request`).

A new subcommand (e.g. ``import``) is one module that calls, at import time::

    register(Command("import", "cmd.import", configure, run, order=35))

with ``configure(parser, msg)`` adding its arguments to its own (already created) parser and
``run(args, ctx) -> exit status`` writing through :mod:`calc.cli.io` (``io.emit_json`` keeps
the JSON format of the other commands), plus ``"cmd.import"`` in both message catalogues; the
module is imported next to ``commands`` and ``sweep`` in :func:`calc.cli.app.main`. A new
request source (``--config FILE``) is a ``register_source(RequestSource(...))`` in that module.
Raise :class:`calc.errors.InputError` for bad input: the CLI turns it into the coded error and
exit status 2.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from .messages import Messages

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs milliseconds of start-up
    from typing import Callable


@dataclass
class Context:
    """What every command gets besides its arguments: the words and the output mode
    (``"table"``, ``"json"`` or ``"csv"``)."""

    msg: Messages
    mode: str
    prog: str
    flags: list[str] = field(default_factory=list)  # the command's long options, once known


@dataclass(frozen=True)
class Command:
    name: str
    help_key: str  # message id of its one-line help (``cli`` section of the catalogue)
    configure: Callable[[argparse.ArgumentParser, Messages], None]
    run: Callable[[argparse.Namespace, Context], int]
    json_only: bool = False  # always JSON, whatever the terminal (schema, import)
    order: int = 100  # place in --help (lower first)


@dataclass(frozen=True)
class RequestSource:
    """``add_arguments(group, msg)`` adds its option(s) to estimate, plan and sweep;
    ``load(args)`` returns the request it read, or ``None`` when its option was not given."""

    name: str
    add_arguments: Callable[[argparse._ArgumentGroup, Messages], None]
    load: Callable[[argparse.Namespace], object]


COMMANDS: list[Command] = []
REQUEST_SOURCES: list[RequestSource] = []


def register(command: Command) -> Command:
    COMMANDS[:] = [c for c in COMMANDS if c.name != command.name] + [command]
    return command


def register_source(source: RequestSource) -> RequestSource:
    REQUEST_SOURCES[:] = [s for s in REQUEST_SOURCES if s.name != source.name] + [source]
    return source
