-- Drift on a frozen anchor set.
--
-- anchors: items with their expected verdict (a screen anchor) or a reference art score (an art
-- anchor, revisions only), one per item. drift_runs: each run of the set against the live model;
-- alerted marks the run that raised model.drift (the first drifted run after one in bounds).
-- The drift run is a chore one replica runs at a time (maintenance_leases).
CREATE TABLE anchors (
    id         bigserial PRIMARY KEY,
    kind       text    NOT NULL,
    item_id    bigint  NOT NULL,
    verdict    text,
    art        double precision,
    created_at bigint  NOT NULL
);
CREATE UNIQUE INDEX anchors_item ON anchors (kind, item_id);

CREATE TABLE drift_runs (
    id             bigserial PRIMARY KEY,
    at             bigint  NOT NULL,
    compared       integer NOT NULL,
    agreement      double precision,
    mean_art_shift double precision,
    drifted        integer NOT NULL,
    alerted        integer NOT NULL
);

INSERT INTO maintenance_leases (name) VALUES ('drift');
