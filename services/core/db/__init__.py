"""The database: engine, sessions and migrations, the shared ORM tables and their repositories."""
