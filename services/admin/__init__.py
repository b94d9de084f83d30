"""The admin web page at ``/admin``: the evaluation memory, rubrics and their versions in a
browser, with no build step and no network beyond this server."""
