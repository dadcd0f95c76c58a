"""``python -m charmem_cli``."""

from charmem_cli.app import main

raise SystemExit(main())
