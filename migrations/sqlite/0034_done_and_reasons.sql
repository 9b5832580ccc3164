-- Settled jobs stay in the admin's list (state done) for OWED_RETAIN_DONE, read from the events
-- that settled them rather than kept twice: every attempt's event names its job (job_id; jobs'
-- ids are never reused), and the events' retention prunes them. Events written before this
-- have no job and are not listed.
ALTER TABLE events ADD COLUMN job_id INTEGER;
CREATE INDEX events_done ON events (job_id, at)
    WHERE job_id IS NOT NULL AND outcome IN ('allow', 'block', 'scored', 'decided');

-- A verdict by hand and an appeal's answer may carry a public reason, which the item's author
-- sees (the note stays the moderators'): on the event that gave it, on the verdict it gave (the
-- author's view shows the verdict's), and on the appeal it answered.
ALTER TABLE events ADD COLUMN public_reason TEXT;
ALTER TABLE screens ADD COLUMN public_reason TEXT;
-- The author's view reads a verdict's reason beside it: the view's covering index holds it too.
DROP INDEX screens_verdict;
CREATE INDEX screens_verdict ON screens (kind, item_id, verdict, confidence, public_reason);
ALTER TABLE reviews ADD COLUMN public_reason TEXT;

DROP TRIGGER events_decide_review;
CREATE TRIGGER events_decide_review AFTER INSERT ON events WHEN NEW.outcome = 'decided' BEGIN
    UPDATE reviews SET decided_at = NEW.at, decided_by = NEW.admin_id, outcome = NEW.verdict,
        public_reason = NEW.public_reason, claimed_by = NULL, claim_until = NULL
    WHERE kind = NEW.kind AND item_id = NEW.item_id AND decided_at IS NULL;
END;
