"""``python -m advest``: the ``advest`` command."""

from advest.cli import main

raise SystemExit(main())
