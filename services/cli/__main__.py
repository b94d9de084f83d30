"""``python -m services.cli``: the ``plaudit`` command."""

from services.cli.main import main

main()
