-- Retention: what the pruner reads, and the lease that lets exactly one replica prune.

-- Settled deliveries by age; pending ones (owed work) are never pruned and stay out of it.
CREATE INDEX webhook_deliveries_settled ON webhook_deliveries (created_at, id) WHERE status <> 'pending';

-- One row per periodic chore that one replica at a time should run.
CREATE TABLE maintenance_leases (
    name        TEXT    PRIMARY KEY,
    owner       TEXT,
    lease_until INTEGER NOT NULL DEFAULT 0
);
INSERT INTO maintenance_leases (name) VALUES ('prune');
