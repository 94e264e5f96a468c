"""``python -m pyrater``: the command line, as the ``pyrater`` script runs it."""

from .cli import main

raise SystemExit(main())
