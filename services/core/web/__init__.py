"""The HTTP kit every app shares: app factory, auth, errors as answers, paging, guards, pages."""
