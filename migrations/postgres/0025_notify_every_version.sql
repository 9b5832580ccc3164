-- Every change of an author's kept version notifies the author (issue 25: the 304 from memory).
--
-- A replica answers an author's view from memory while its notifier has heard no change for
-- them. Until now each table had a notification trigger of its own, and some changes bumped the
-- version (0015) without one: a verdict overturned, a score changed, an item edited or a budgets
-- row deleted by raw SQL. The replica that had the view in memory went on answering the old
-- one (TestMine304FromMemoryNeverHidesACommittedChange). Now the notification follows the
-- version itself: whatever bumps it notifies, in the same transaction, and a table with a
-- version trigger needs nothing more. Row 0 (what every view shares: the holds) notifies
-- everyone ('<schema>:*', as holds_mine_notify does).
--
-- The owed jobs' and the budgets' row notifications go: each of them comes with a bump of the
-- same author's version (0015's triggers count a superset of their columns), and they are the
-- ones on the queue's path, run for every job and every charge. The others stay (rare writes,
-- and the settled jobs' one per author and statement, 0019; a transaction's identical
-- notifications reach the listeners once).
CREATE FUNCTION owed_mine_versions_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.user_id = 0 THEN
        PERFORM pg_notify('owed_mine', TG_TABLE_SCHEMA || ':*');
    ELSE
        PERFORM pg_notify('owed_mine', TG_TABLE_SCHEMA || ':' || NEW.user_id);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER mine_versions_notify AFTER INSERT ON mine_versions FOR EACH ROW
    EXECUTE FUNCTION owed_mine_versions_notify();
CREATE TRIGGER mine_versions_notify_update AFTER UPDATE ON mine_versions FOR EACH ROW
    WHEN (OLD.version IS DISTINCT FROM NEW.version) EXECUTE FUNCTION owed_mine_versions_notify();

DROP TRIGGER content_jobs_mine_notify ON content_jobs;
DROP TRIGGER content_jobs_mine_notify_update ON content_jobs;
DROP TRIGGER budgets_mine_notify ON budgets;
DROP TRIGGER budgets_mine_notify_update ON budgets;

