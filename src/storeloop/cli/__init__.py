"""The ``storeloop`` command line (:mod:`.main`: the parser; :mod:`.commands` and :mod:`.runs`: one
function per subcommand; :mod:`.render`: what it prints)."""

from storeloop.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
