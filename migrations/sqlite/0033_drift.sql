-- Drift on a frozen anchor set.
--
-- anchors: items with their expected verdict (a screen anchor) or a reference art score (an art
-- anchor, revisions only), one per item. drift_runs: each run of the set against the live model;
-- alerted marks the run that raised model.drift (the first drifted run after one in bounds).
-- The drift run is a chore one replica runs at a time (maintenance_leases).
CREATE TABLE anchors (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    kind       TEXT    NOT NULL,
    item_id    INTEGER NOT NULL,
    verdict    TEXT,
    art        REAL,
    created_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX anchors_item ON anchors (kind, item_id);

CREATE TABLE drift_runs (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    at             INTEGER NOT NULL,
    compared       INTEGER NOT NULL,
    agreement      REAL,
    mean_art_shift REAL,
    drifted        INTEGER NOT NULL,
    alerted        INTEGER NOT NULL
);

INSERT INTO maintenance_leases (name) VALUES ('drift');
