"""The embedded SQLite store: connections, migrations and the SQL that writes."""
