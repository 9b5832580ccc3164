-- The twin of PostgreSQL's 0025_notify_every_version, so that a version names the same step in
-- both dialects. There every bump of an author's kept version notifies the other replicas; on
-- SQLite one process holds the one writer and its notifier hears every change from the store,
-- so here it changes nothing.
SELECT 1;
