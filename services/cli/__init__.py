"""Every ``plaudit`` command: the app (main.py), one module per command group, the one
progress printer (progress.py) and the one job follower (jobs_client.py, jobs.run_on_server)."""
