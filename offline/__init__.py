"""Offline tools of the ``plaudit`` command: judge evaluations and job control.

They run beside a server, not in it: ``plaudit eval judge`` measures a judge in its own process
or starts the evaluation on a server, and ``plaudit jobs`` follows a server's jobs over HTTP.
"""
